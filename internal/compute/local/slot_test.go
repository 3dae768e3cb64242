package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// requireSlots skips loudly where warm slots cannot exist: they need bubblewrap and root.
func requireSlots(t testing.TB) {
	t.Helper()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots attach a dispatch's files with mounts: only root can")
	}
}

var slotOpts = func(t testing.TB) compute.WarmOptions {
	return compute.WarmOptions{Dir: filepath.Join(t.TempDir(), "slots"), ClaimRoot: "/agora", PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}}
}

// runInSlot starts s in slot and waits for it.
func runInSlot(t testing.TB, p *Provider, slot *Slot, s compute.Spec) result {
	t.Helper()
	var out, errOut syncBuffer
	s.Stdout, s.Stderr = &out, &errOut
	h, err := p.StartInSlot(t.Context(), slot, s)
	if err != nil {
		t.Fatalf("StartInSlot: %v", err)
	}
	exit, err := h.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return result{exit: exit, stdout: out.String(), stderr: errOut.String()}
}

func newSlot(t testing.TB, p *Provider, tmpl compute.Spec, o compute.WarmOptions) *Slot {
	t.Helper()
	s, err := p.NewSlot(t.Context(), tmpl, o)
	if err != nil {
		t.Fatalf("NewSlot: %v", err)
	}
	return s
}

// TestSlot_IsolationSameAsCold runs the isolation probe suite in a cold sandbox and in a
// warm slot of the same shape: every probe must exit the same, and as the suite wants.
func TestSlot_IsolationSameAsCold(t *testing.T) {
	requireSlots(t)
	t.Setenv("AGORA_TEST_HOST_CANARY", "host-canary-value")
	p := newProvider(t, Options{})
	o := slotOpts(t)
	hidden := filepath.Join(t.TempDir(), "hidden.txt")
	if err := os.WriteFile(hidden, []byte("host-only"), 0o644); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	for _, tc := range isolationCases(hidden, home, "/agora") {
		t.Run(tc.name, func(t *testing.T) {
			roDir, rwDir := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(roDir, "in.txt"), []byte("readable"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := compute.Spec{ID: "iso", Argv: []string{"sh", "-c", tc.script}, Env: []string{"PATH=/usr/bin:/bin"},
				Binds: []compute.Bind{{Src: roDir, Dst: "/agora/ro"}, {Src: rwDir, Dst: "/agora/rw", Writable: true}}}
			cold := run(t, p, spec)
			slot := newSlot(t, p, spec, o)
			warm := runInSlot(t, p, slot, spec)
			if cold.exit.Code != tc.want || warm.exit.Code != cold.exit.Code {
				t.Errorf("%q: cold exit %d, warm exit %d, want %d (warm stderr %q)", tc.script, cold.exit.Code, warm.exit.Code, tc.want, warm.stderr)
			}
			if warm.exit.Isolation != cold.exit.Isolation {
				t.Errorf("isolation: warm %q, cold %q", warm.exit.Isolation, cold.exit.Isolation)
			}
		})
	}
}

// TestSlot_ClaimDeliversPerDispatch: what the claim brings (binds, fd-3 secrets, output)
// reaches the worker only at claim, and a writable bind's writes reach the host.
func TestSlot_ClaimDeliversPerDispatch(t *testing.T) {
	requireSlots(t)
	for name, runAs := range map[string]*compute.HostUser{"invoker": nil, "runas": testRunAs} {
		t.Run(name, func(t *testing.T) { claimDelivers(t, runAs) })
	}
}

func claimDelivers(t *testing.T, runAs *compute.HostUser) {
	p := newProvider(t, Options{})
	o := slotOpts(t)
	secretR, _, _ := os.Pipe()
	tmpl := compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", "cat /agora/in/x; cat <&3; pwd; echo done > /agora/out/y; echo err >&2"},
		Env: []string{"PATH=/usr/bin:/bin", "AGORA_DISPATCH_ID=tmpl"}, Dir: "/agora/out", Files: []*os.File{secretR},
		Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/in"}, {Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}, RunAs: runAs}
	slot := newSlot(t, p, tmpl, o)
	secretR.Close()

	in, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "x"), []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if runAs != nil {
		if err := os.Chown(out, int(runAs.UID), int(runAs.GID)); err != nil {
			t.Fatal(err)
		}
	}
	r, w, _ := os.Pipe()
	go func() { w.Write([]byte("secret-value\n")); w.Close() }()
	spec := tmpl
	spec.ID, spec.Env, spec.Files = "d1", []string{"PATH=/usr/bin:/bin", "AGORA_DISPATCH_ID=d1"}, []*os.File{r}
	spec.Binds = []compute.Bind{{Src: in, Dst: "/agora/in"}, {Src: out, Dst: "/agora/out", Writable: true}}
	var outBuf, errBuf syncBuffer
	spec.Stdout, spec.Stderr = &outBuf, &errBuf
	h, err := p.StartInSlot(t.Context(), slot, spec)
	r.Close() // as the dispatch does once the sandbox has started: the slot keeps a copy
	if err != nil {
		t.Fatal(err)
	}
	exit, _ := h.Wait()
	res := result{exit: exit, stdout: outBuf.String(), stderr: errBuf.String()}
	if res.exit.Code != 0 || res.stdout != "input\nsecret-value\n/agora/out\n" || res.stderr != "err\n" {
		t.Fatalf("exit %d stdout %q stderr %q", res.exit.Code, res.stdout, res.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "y")); string(b) != "done\n" {
		t.Fatalf("host sees %q in the writable bind", b)
	}
	if fi, err := os.Stat(filepath.Join(out, "y")); err != nil {
		t.Fatal(err)
	} else if want := uint32(os.Getuid()); runAs != nil && fi.Sys().(*syscall.Stat_t).Uid != runAs.UID || runAs == nil && fi.Sys().(*syscall.Stat_t).Uid != want {
		t.Fatalf("the worker's file is owned by uid %d; want the run-as or invoking user", fi.Sys().(*syscall.Stat_t).Uid)
	}
	if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the slot's directory outlived its sandbox: %v", err)
	}
	// Never reused: a second claim of the spent slot is refused.
	if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotClaimed) {
		t.Fatalf("second claim: %v, want ErrSlotClaimed", err)
	}
}

// TestSlot_ShapeMismatchRefused: a spec of another shape (another limit, a bind outside the
// claim root, another network mode) is refused and the slot spent, never run.
func TestSlot_ShapeMismatchRefused(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	base := compute.Spec{ID: "s", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}
	for name, mut := range map[string]func(*compute.Spec){
		"memory":  func(s *compute.Spec) { s.Limits.Memory = 1 << 30 },
		"network": func(s *compute.Spec) { s.Network = true },
		"bind":    func(s *compute.Spec) { s.Binds = []compute.Bind{{Src: "/usr", Dst: "/x"}} },
		"argv":    func(s *compute.Spec) { s.Argv = []string{"false"} },
		"env":     func(s *compute.Spec) { s.Env = append(s.Env, "X=1") },
	} {
		t.Run(name, func(t *testing.T) {
			slot := newSlot(t, p, base, o)
			spec := base
			mut(&spec)
			if compute.SlotShape(spec, o) == slot.Shape() {
				t.Fatal("the shapes are equal")
			}
			if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotShape) {
				t.Fatalf("StartInSlot: %v, want ErrSlotShape", err)
			}
			if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused slot's directory remains: %v", err)
			}
		})
	}
}

// TestSlot_ConcurrentClaimsNeverShare: 200 claims race for 4 slots: each slot runs exactly
// one of them; every other claim is refused as already claimed.
func TestSlot_ConcurrentClaimsNeverShare(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	spec := compute.Spec{ID: "c", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}
	slots := make([]*Slot, 4)
	for i := range slots {
		slots[i] = newSlot(t, p, spec, o)
	}
	var mu sync.Mutex
	won := map[*Slot]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			slot := slots[i%len(slots)]
			h, err := p.StartInSlot(t.Context(), slot, spec)
			if errors.Is(err, ErrSlotClaimed) {
				return
			}
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			h.Wait()
			mu.Lock()
			won[slot]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for i, s := range slots {
		if won[s] != 1 {
			t.Errorf("slot %d ran %d claims, want exactly 1", i, won[s])
		}
	}
}

// TestSlot_OtherSlotsDirUnreachable: a claimed slot's sandbox cannot see another slot's
// host directory, nor the slot root.
func TestSlot_OtherSlotsDirUnreachable(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	spec := compute.Spec{ID: "o", Env: []string{"PATH=/usr/bin:/bin"}}
	other := newSlot(t, p, compute.Spec{ID: "x", Argv: []string{"true"}, Env: spec.Env}, o)
	defer other.Discard()
	spec.Argv = []string{"sh", "-c", "ls " + other.Dir() + " || ls " + o.Dir + "; exit 7"}
	res := runInSlot(t, p, newSlot(t, p, spec, o), spec)
	if res.exit.Code != 7 || res.stdout != "" {
		t.Fatalf("exit %d stdout %q: another slot's directory is visible", res.exit.Code, res.stdout)
	}
}

// TestSlot_SymlinkSwapBeforeClaim: the slot's mount point swapped for a symlink to a host
// directory before the claim changes nothing: the claim attaches through the descriptor
// pinned at fill, and the sandbox sees the claim's files, not the link's target.
func TestSlot_SymlinkSwapBeforeClaim(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	spec := compute.Spec{ID: "l", Argv: []string{"cat", "/agora/in/x"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: "/unused", Dst: "/agora/in"}}}
	slot := newSlot(t, p, spec, o)
	decoy := t.TempDir()
	mp := filepath.Join(slot.Dir(), "claim")
	// The mount point is busy (a mount), so a rename is refused: a host attacker would first
	// detach it, then move it aside and put a link in its place.
	if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(mp, mp+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, mp); err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "x"), []byte("claim's\n"), 0o644)
	spec.Binds[0].Src = in
	var out, errOut syncBuffer
	spec.Stdout, spec.Stderr = &out, &errOut
	// Either the claim attaches to the mount pinned at fill (the sandbox reads the claim's
	// file) or it fails closed; it never follows the link.
	if h, err := p.StartInSlot(t.Context(), slot, spec); err != nil {
		t.Logf("claim refused: %v", err)
	} else if h.Wait(); out.String() != "claim's\n" {
		t.Fatalf("sandbox read %q (stderr %q), want the claim's file", out.String(), errOut.String())
	}
	if m, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(m), decoy) {
		t.Fatalf("the claim mounted on the link's target %s", decoy)
	}
	if ents, _ := os.ReadDir(decoy); len(ents) != 0 {
		t.Fatalf("the claim mounted into the link's target: %v", ents)
	}
}

// TestSlot_KilledHolderNeverReused: the process holding a slot is killed with SIGKILL; its
// held sandbox dies with it, and ReapSlots removes the directory, so nothing can claim it.
func TestSlot_KilledHolderNeverReused(t *testing.T) {
	requireSlots(t)
	dir := filepath.Join(t.TempDir(), "slots")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlot_HolderHelper$")
	// The holder is killed, so its own temporary directories are made in this test's.
	cmd.Env = append(os.Environ(), "AGORA_TEST_SLOT_HOLDER="+dir, "TMPDIR="+t.TempDir())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := stdout.Read(buf)
	line := strings.TrimSpace(string(buf[:n]))
	slotDir, tid, ok := strings.Cut(line, " ")
	if !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	cmd.Process.Kill()
	cmd.Wait()
	id, err := parseTaskID(tid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := readProcStat(id.pid)
		if err != nil || st.start != id.start || isZombie(id.pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held sandbox %s outlived its holder", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ReapSlots(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(slotDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale slot directory %s remains after ReapSlots: %v", slotDir, err)
	}
}

// TestSlot_HolderHelper is the holder TestSlot_KilledHolderNeverReused kills.
func TestSlot_HolderHelper(t *testing.T) {
	dir := os.Getenv("AGORA_TEST_SLOT_HOLDER")
	if dir == "" {
		t.Skip("SKIP: helper process of TestSlot_KilledHolderNeverReused only")
	}
	p := newProvider(t, Options{})
	slot := newSlot(t, p, compute.Spec{ID: "h", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}, compute.WarmOptions{Dir: dir, ClaimRoot: "/agora"})
	os.Stdout.WriteString(slot.Dir() + " " + slot.TaskID() + "\n")
	agoratest.Hang() // until the test kills it
}

// isZombie reports whether pid has exited and waits to be reaped.
func isZombie(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return strings.Contains(string(b), "\nState:\tZ")
}
