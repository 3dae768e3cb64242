package local

import (
	"errors"

	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// The attacks on a prestarted slot: its command runs before any claim, so
// what it can see and do then, what a claim may feed it, and what happens when its holder or
// the command itself goes away before the claim.

// prestartOpts are slotOpts with the command started at fill, its claim pipe in CLAIM_FD.
func prestartOpts(t testing.TB) compute.WarmOptions {
	o := slotOpts(t)
	o.PrestartEnv = "CLAIM_FD"
	return o
}

// waitClaimSh is what a prestarted shell does first, as the worker does: one byte on its
// claim pipe (EOF: exit 7 having done nothing), then re-enter its working directory. A cold
// start has no CLAIM_FD and goes straight on.
const waitClaimSh = `if [ -n "$CLAIM_FD" ]; then n=$(head -c1 <&$CLAIM_FD | wc -c); [ "$n" = 1 ] || exit 7; cd "$PWD" || exit 8; fi; `

// shellCopy copies the system shell into a directory of its own, as the pinned worker is a
// file of AGORA_HOME: the slot binds it at fill under the claim root.
func shellCopy(t testing.TB) string {
	t.Helper()
	src, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "sh")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSlotPrestart_BeforeClaimNothingOfTheDispatch: the prestarted command runs at fill and,
// before its claim, sees under the claim root only its own binary and an empty working
// directory, can write nothing there (a process racing the claim to plant a file into the
// job's paths), and has no per-dispatch environment; after the claim it sees exactly the
// claim's files, none of what it tried to plant, and its claim pipe carries one byte only (no
// second job can arrive on it).
func TestSlotPrestart_BeforeClaimNothingOfTheDispatch(t *testing.T) {
	requireSlots(t)
	for name, runAs := range map[string]*compute.HostUser{"invoker": nil, "runas": testRunAs} {
		t.Run(name, func(t *testing.T) { prestartSeesNothing(t, runAs) })
	}
}

func prestartSeesNothing(t *testing.T, runAs *compute.HostUser) {
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	sh := shellCopy(t)
	before := `echo "fill: $(ls -A /agora | tr '\n' ' ')| $(ls -A /agora/out | wc -l) | dispatch-id=${AGORA_DISPATCH_ID:-none}"; ` +
		`for f in /agora/out/planted /agora/planted /agora/in /agora/bin/sh; do (echo x > $f) 2>/dev/null && echo "wrote $f"; done; ` +
		`mkdir /agora/out/d 2>/dev/null && echo "made a dir"; `
	after := `echo "claim: $(ls -A /agora | tr '\n' ' ')"; cat /agora/in/x; pwd; ls -A /agora/out; ` +
		`echo "more: $(head -c1 <&$CLAIM_FD 2>/dev/null | wc -c)"; echo done > /agora/out/y`
	secretR, _, _ := os.Pipe()
	tmpl := compute.Spec{ID: "tmpl", Argv: []string{"/agora/bin/sh", "-c", before + waitClaimSh + after},
		Env: []string{"PATH=/usr/bin:/bin", "AGORA_DISPATCH_ID=tmpl"}, Dir: "/agora/out", Files: []*os.File{secretR}, RunAs: runAs,
		Binds: []compute.Bind{{Src: sh, Dst: "/agora/bin/sh"}, {Src: "/nonexistent-at-fill", Dst: "/agora/in"}, {Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}}
	slot := newSlot(t, p, tmpl, o)
	secretR.Close()
	// The command has run its whole pre-claim part once it waits on its claim pipe.
	waitDescendant(t, slot.h.pid, "head")

	in, out := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(in, "x"), []byte("input\n"), 0o644)
	if runAs != nil {
		os.Chown(out, int(runAs.UID), int(runAs.GID))
	}
	r, w, _ := os.Pipe()
	w.Close()
	spec := tmpl
	spec.ID, spec.Env, spec.Files = "d1", []string{"PATH=/usr/bin:/bin", "AGORA_DISPATCH_ID=d1"}, []*os.File{r}
	spec.Binds = []compute.Bind{{Src: sh, Dst: "/agora/bin/sh"}, {Src: in, Dst: "/agora/in"}, {Src: out, Dst: "/agora/out", Writable: true}}
	res := runInSlot(t, p, slot, spec)
	r.Close()
	want := "fill: bin out | 0 | dispatch-id=none\n" +
		"claim: bin in out \ninput\n/agora/out\nmore: 0\n"
	if res.exit.Code != 0 || res.stdout != want {
		t.Fatalf("exit %d stderr %q stdout:\n%s\nwant:\n%s", res.exit.Code, res.stderr, res.stdout, want)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 1 || ents[0].Name() != "y" {
		t.Fatalf("the claim's out directory holds %v, want only the command's y", ents)
	}
	if b, _ := os.ReadFile(sh); strings.Contains(string(b), "x\n") && len(b) < 10 {
		t.Fatalf("the command overwrote its binary on the host")
	}
	if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotClaimed) {
		t.Fatalf("second claim: %v, want ErrSlotClaimed", err)
	}
}

// TestSlotPrestart_AnotherBinaryRefused: a claim whose spec binds another file at the
// command's path than the one the slot started (another pinned copy, or the same path
// replaced since fill) does not fit the slot: refused as a shape mismatch (the dispatch
// starts cold), and the started command is killed, having run nothing of the claim.
func TestSlotPrestart_AnotherBinaryRefused(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	for name, mut := range map[string]func(t *testing.T, sh string) string{
		"another file": func(t *testing.T, _ string) string { return shellCopy(t) },
		"replaced in place": func(t *testing.T, sh string) string {
			b, _ := os.ReadFile(sh)
			tmp := sh + ".new"
			os.WriteFile(tmp, b, 0o755)
			if err := os.Rename(tmp, sh); err != nil {
				t.Fatal(err)
			}
			return sh
		},
	} {
		t.Run(name, func(t *testing.T) {
			sh := shellCopy(t)
			out := t.TempDir()
			tmpl := compute.Spec{ID: "b", Argv: []string{"/agora/bin/sh", "-c", waitClaimSh + "echo ran > /agora/out/ran"}, Env: []string{"PATH=/usr/bin:/bin"},
				Binds: []compute.Bind{{Src: sh, Dst: "/agora/bin/sh"}, {Src: out, Dst: "/agora/out", Writable: true}}}
			slot := newSlot(t, p, tmpl, o)
			spec := tmpl
			spec.Binds = []compute.Bind{{Src: mut(t, sh), Dst: "/agora/bin/sh"}, {Src: out, Dst: "/agora/out", Writable: true}}
			if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotShape) {
				t.Fatalf("claim with another binary: %v, want ErrSlotShape", err)
			}
			waitSlotDead(t, slot)
			if _, err := os.Stat(filepath.Join(out, "ran")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused claim ran: %v", err)
			}
		})
	}
}

// TestSlotPrestart_NoClaimComes: the holder lets go of the claim pipe without a claim (what
// its death does): the command reads EOF and exits having run nothing, the slot is dead, and
// a later claim is refused, never run in it.
func TestSlotPrestart_NoClaimComes(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	out := t.TempDir()
	tmpl := compute.Spec{ID: "n", Argv: []string{"sh", "-c", waitClaimSh + "echo ran > /agora/out/ran"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: out, Dst: "/agora/out", Writable: true}}}
	slot := newSlot(t, p, tmpl, o)
	slot.goW.Close()
	waitSlotDead(t, slot)
	if _, err := p.StartInSlot(t.Context(), slot, tmpl); err == nil || errors.Is(err, ErrSlotClaimed) {
		t.Fatalf("claim of a slot whose command ended: %v, want a failed claim", err)
	}
	if _, err := os.Stat(filepath.Join(out, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran without a claim: %v", err)
	}
}

// TestSlotPrestart_CommandExitsBeforeClaim: a command that ends before its claim (crashed,
// killed) leaves a dead slot: Alive says so (the pool counts it failed and replaces it) and
// a claim of it fails (the dispatch starts cold), never reporting the early exit as the
// dispatch's.
func TestSlotPrestart_CommandExitsBeforeClaim(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	tmpl := compute.Spec{ID: "e", Argv: []string{"sh", "-c", "exit 0"}, Env: []string{"PATH=/usr/bin:/bin"}}
	slot := newSlot(t, p, tmpl, o)
	waitSlotDead(t, slot)
	if _, err := p.StartInSlot(t.Context(), slot, tmpl); err == nil || !strings.Contains(err.Error(), "ended before its claim") {
		t.Fatalf("claim of a slot whose command exited: %v", err)
	}
}

// TestSlotPrestart_IsolationSameAsCold runs the isolation probe suite in a cold sandbox and
// in a prestarted slot of the same shape: every probe must exit the same.
func TestSlotPrestart_IsolationSameAsCold(t *testing.T) {
	requireSlots(t)
	t.Setenv("AGORA_TEST_HOST_CANARY", "host-canary-value")
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	hidden := filepath.Join(t.TempDir(), "hidden.txt")
	os.WriteFile(hidden, []byte("host-only"), 0o644)
	home, _ := os.UserHomeDir()
	for _, tc := range isolationCases(hidden, home, "/agora") {
		t.Run(tc.name, func(t *testing.T) {
			roDir, rwDir := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(roDir, "in.txt"), []byte("readable"), 0o644)
			spec := compute.Spec{ID: "iso", Argv: []string{"sh", "-c", waitClaimSh + "unset CLAIM_FD; " + tc.script}, Env: []string{"PATH=/usr/bin:/bin"},
				Dir:   "/agora/rw",
				Binds: []compute.Bind{{Src: roDir, Dst: "/agora/ro"}, {Src: rwDir, Dst: "/agora/rw", Writable: true}}}
			cold := run(t, p, spec)
			warm := runInSlot(t, p, newSlot(t, p, spec, o), spec)
			if cold.exit.Code != tc.want || warm.exit.Code != cold.exit.Code {
				t.Errorf("%q: cold exit %d, warm exit %d, want %d (warm stderr %q)", tc.script, cold.exit.Code, warm.exit.Code, tc.want, warm.stderr)
			}
			if warm.exit.Isolation != cold.exit.Isolation {
				t.Errorf("isolation: warm %q, cold %q", warm.exit.Isolation, cold.exit.Isolation)
			}
		})
	}
}

// waitDescendant waits until a process named comm runs below pid.
func waitDescendant(t *testing.T, pid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		parent := map[int]int{}
		named := []int{}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			st, err := readProcStat(n)
			if err != nil {
				continue
			}
			parent[n] = st.ppid
			if b, _ := os.ReadFile("/proc/" + e.Name() + "/comm"); strings.TrimSpace(string(b)) == comm {
				named = append(named, n)
			}
		}
		for _, n := range named {
			for q, hops := n, 0; q > 1 && hops < 64; q, hops = parent[q], hops+1 {
				if q == pid {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s process below pid %d", comm, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSlotDead waits for a slot's sandbox to end.
func waitSlotDead(t *testing.T, slot *Slot) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for slot.Alive() {
		if time.Now().After(deadline) {
			t.Fatal("the slot's sandbox is still alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSlotPrestart_DiscardRemovesEverything: a prestarted slot discarded unclaimed (its
// holder stopping) leaves no mount and no directory behind: the pre-tree and its binary's
// bind are unmounted with the slot's mount point.
func TestSlotPrestart_DiscardRemovesEverything(t *testing.T) {
	requireSlots(t)
	for name, runAs := range map[string]*compute.HostUser{"invoker": nil, "runas": testRunAs} {
		t.Run(name, func(t *testing.T) {
			p := newProvider(t, Options{})
			sh := shellCopy(t)
			tmpl := compute.Spec{ID: "d", Argv: []string{"/agora/bin/sh", "-c", waitClaimSh + "true"}, Env: []string{"PATH=/usr/bin:/bin"},
				Dir: "/agora/out", RunAs: runAs,
				Binds: []compute.Bind{{Src: sh, Dst: "/agora/bin/sh"}, {Src: "/nonexistent", Dst: "/agora/out", Writable: true}}}
			slot := newSlot(t, p, tmpl, prestartOpts(t))
			waitDescendant(t, slot.h.pid, "head")
			slot.Discard()
			if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
				m, _ := host.MountsUnder(slot.Dir())
				t.Fatalf("the discarded slot's directory remains (%v), mounts %v", err, m)
			}
		})
	}
}
