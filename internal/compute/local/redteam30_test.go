package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// Attacks on the bubblewrap warm slot from outside its builder.

// TestRedTeam30_SlotReadOnlyBindSubmount: a read-only bind whose source has a mount of its
// own below it. bwrap's --ro-bind makes every submount read-only, nosuid and nodev; a slot
// attaches the claim's binds itself, so it must do the same, or a warm dispatch can write
// where a cold one cannot.
func TestRedTeam30_SlotReadOnlyBindSubmount(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	src := t.TempDir()
	sub := filepath.Join(src, "sub")
	if err := os.Mkdir(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	// A submount that is writable, suid and dev on the host.
	if err := unix.Mount("rt30-sub", sub, "tmpfs", 0, "mode=0777,size=64k"); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs below the bind source: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
	script := `if echo x > /agora/ro/sub/written 2>/dev/null; then echo WROTE; fi
grep ' /agora/ro/sub ' /proc/self/mountinfo | cut -d' ' -f6`
	spec := compute.Spec{ID: "sub", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: src, Dst: "/agora/ro"}}, RunAs: testRunAs}
	cold := run(t, p, spec)
	os.Remove(filepath.Join(sub, "written"))
	warm := runInSlot(t, p, newSlot(t, p, spec, o), spec)
	if strings.Contains(cold.stdout, "WROTE") {
		t.Fatalf("cold sandbox wrote into a read-only bind's submount: %q", cold.stdout)
	}
	if _, err := os.Stat(filepath.Join(sub, "written")); err == nil || strings.Contains(warm.stdout, "WROTE") {
		t.Errorf("warm slot wrote into a read-only bind's submount (a cold sandbox cannot): stdout %q", warm.stdout)
	}
	for _, opt := range []string{"ro", "nosuid", "nodev"} {
		if !hasMountOpt(cold.stdout, opt) {
			t.Errorf("cold submount options %q lack %s", cold.stdout, opt)
		}
		if !hasMountOpt(warm.stdout, opt) {
			t.Errorf("warm submount options %q lack %s (cold: %q)", strings.TrimSpace(warm.stdout), opt, strings.TrimSpace(cold.stdout))
		}
	}
}

func hasMountOpt(out, opt string) bool {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "WROTE" {
			continue
		}
		for _, o := range strings.Split(line, ",") {
			if o == opt {
				return true
			}
		}
		return false
	}
	return false
}

// TestRedTeam30_SlotKilledBeforeClaim: the held sandbox of a ready slot dies (killed from
// outside, OOM) before a dispatch claims it. The claim must fail promptly (the dispatch then
// starts cold), never hang, never report a run that did not happen.
func TestRedTeam30_SlotKilledBeforeClaim(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	spec := compute.Spec{ID: "k", Argv: []string{"sh", "-c", "echo RAN"}, Env: []string{"PATH=/usr/bin:/bin"}}
	slot := newSlot(t, p, spec, o)
	id, err := parseTaskID(slot.TaskID())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(id.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); slot.Alive(); {
		if time.Now().After(deadline) {
			t.Fatal("the killed slot's bwrap has not exited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var out syncBuffer
	spec.Stdout = &out
	type res struct {
		exit compute.Exit
		err  error
	}
	done := make(chan res, 1)
	go func() {
		h, err := p.StartInSlot(t.Context(), slot, spec)
		if err != nil {
			done <- res{err: err}
			return
		}
		e, err := h.Wait()
		done <- res{exit: e, err: err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			// The caller (dispatch.startWarm) starts cold only on an error: an exit would be
			// recorded as the dispatch's own (killed) though nothing of it ran.
			t.Fatalf("a dead slot was claimed as if alive; its run ended %+v, stdout %q", r.exit, out.String())
		}
		if strings.Contains(out.String(), "RAN") {
			t.Fatalf("a killed slot ran the claim: %q", out.String())
		}
		t.Logf("claim of a dead slot: err %v exit %+v", r.err, r.exit)
	case <-time.After(20 * time.Second):
		t.Fatal("a claim of a slot whose sandbox died hangs")
	}
	if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead slot's directory remains: %v", err)
	}
}

// TestRedTeam30_ReapSparesLiveHolder: ReapSlots runs when a pool starts, to clear what a
// crashed holder left. A second resident process on the same home (orch serve beside the
// process running MCP dispatches, or a restart while the old one still drains) sweeps the
// same directory: it must not kill slots whose holder lives, least of all one a dispatch is
// running in.
func TestRedTeam30_ReapSparesLiveHolder(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	spec := compute.Spec{ID: "live", Argv: []string{"sh", "-c", "sleep 1; echo SURVIVED"}, Env: []string{"PATH=/usr/bin:/bin"}}
	running := newSlot(t, p, spec, o)
	ready := newSlot(t, p, spec, o)
	defer ready.Discard()
	var out syncBuffer
	s := spec
	s.Stdout = &out
	h, err := p.StartInSlot(t.Context(), running, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReapSlots(t.Context(), o.Dir); err != nil {
		t.Logf("ReapSlots: %v", err)
	}
	exit, _ := h.Wait()
	if exit.Code != 0 || out.String() != "SURVIVED\n" {
		t.Errorf("a dispatch running in a live holder's slot was killed by another holder's sweep: exit %+v, stdout %q", exit, out.String())
	}
	if _, err := os.Stat(ready.Dir()); err != nil {
		t.Errorf("a live holder's ready slot was swept: %v", err)
	}
}

// TestRedTeam30_ReapAfterCrashMidAttach: the holder is killed with -9 while a claim is being
// attached: the slot's staging tmpfs (in the host's mount namespace, so it outlives the
// process) still has the dispatch's binds in it, the writable workspace among them. The sweep
// of the next start must detach them, never delete through them into the dispatch's files.
func TestRedTeam30_ReapAfterCrashMidAttach(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("the dispatch's work"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := compute.Spec{ID: "crash", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: "/unused", Dst: "/agora/work", Writable: true}}}
	slot := newSlot(t, p, spec, o)
	// What attach had done when the holder died: the staging tmpfs, the writable bind in it.
	stage := filepath.Join(slot.Dir(), "stage-123")
	if err := os.Mkdir(stage, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("agora-claim", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(stage, unix.MNT_DETACH) })
	if err := unix.Mount("", stage, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := bindInto(stage, "work", compute.Bind{Src: victim, Dst: "/agora/work", Writable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(stage, "work"), unix.MNT_DETACH) })
	// The holder dies: its hold goes (as the kernel drops it) and the sandbox with it.
	slot.hold.Close()
	slot.h.abortHeld()
	if err := ReapSlots(t.Context(), o.Dir); err != nil {
		t.Logf("ReapSlots: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(b) != "the dispatch's work" {
		t.Fatalf("the sweep deleted through a bind left mounted in a crashed claim: %v", err)
	}
	if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed slot's directory remains: %v", err)
	}
}

// TestRedTeam30_SlotAliveAfterKill: a held slot says it is alive until its sandbox is
// killed, then not (the pool counts and hands out only live slots).
func TestRedTeam30_SlotAliveAfterKill(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	slot := newSlot(t, p, compute.Spec{ID: "a", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}, slotOpts(t))
	defer slot.Discard()
	if !slot.Alive() {
		t.Fatal("a held slot says it is dead")
	}
	id, _ := parseTaskID(slot.TaskID())
	syscall.Kill(id.pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for slot.Alive() {
		if time.Now().After(deadline) {
			t.Fatal("a killed slot still says it is alive")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedTeam30_SlotMountsAndFDsNoWeakerThanCold compares what the sandbox itself sees, cold
// and warm, same spec: every mount point's flags (a mount writable, suid, dev or exec in the
// slot where the cold one is not), mount points the slot has and the cold sandbox has not
// (each must be read-only), the descriptors the command inherits, and its credentials.
func TestRedTeam30_SlotMountsAndFDsNoWeakerThanCold(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.Chown(rw, int(testRunAs.UID), int(testRunAs.GID)); err != nil {
		t.Fatal(err)
	}
	script := `cut -d' ' -f5,6 /proc/self/mountinfo; echo FDS $(ls /proc/self/fd | wc -l); grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status`
	sr, sw, _ := os.Pipe()
	defer sr.Close()
	sw.Close()
	spec := compute.Spec{ID: "m", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/agora/rw",
		Files: []*os.File{sr}, RunAs: testRunAs, Limits: compute.Limits{MaxProcs: 64},
		Binds: []compute.Bind{{Src: ro, Dst: "/agora/ro"}, {Src: rw, Dst: "/agora/rw", Writable: true}}}
	cold := run(t, p, spec)
	slot := newSlot(t, p, spec, o)
	sr2, sw2, _ := os.Pipe()
	sw2.Close()
	defer sr2.Close()
	wspec := spec
	wspec.Files = []*os.File{sr2}
	warm := runInSlot(t, p, slot, wspec)
	parse := func(out string) (map[string]string, []string) {
		m := map[string]string{}
		var rest []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			mp, opts, ok := strings.Cut(l, " ")
			if ok && strings.HasPrefix(mp, "/") {
				m[mp] = opts
				continue
			}
			rest = append(rest, l)
		}
		return m, rest
	}
	cm, crest := parse(cold.stdout)
	wm, wrest := parse(warm.stdout)
	if len(cm) == 0 || len(wm) == 0 {
		t.Fatalf("no mounts read: cold %q warm %q (stderr %q %q)", cold.stdout, warm.stdout, cold.stderr, warm.stderr)
	}
	has := func(opts, o string) bool {
		for _, x := range strings.Split(opts, ",") {
			if x == o {
				return true
			}
		}
		return false
	}
	for mp, wo := range wm {
		co, ok := cm[mp]
		if !ok {
			if !has(wo, "ro") && mp != "/agora/rw" {
				t.Errorf("the slot has a writable mount %s (%s) a cold sandbox has not", mp, wo)
			}
			continue
		}
		for _, f := range []string{"ro", "nosuid", "nodev", "noexec"} {
			if has(co, f) && !has(wo, f) {
				t.Errorf("mount %s: cold %q has %s, warm %q has not", mp, co, f, wo)
			}
		}
	}
	if strings.Join(crest, "\n") != strings.Join(wrest, "\n") {
		t.Errorf("credentials or descriptors differ:\ncold %q\nwarm %q", crest, wrest)
	}
	t.Logf("cold mounts %d, warm %d; %q", len(cm), len(wm), wrest)
}

// TestRedTeam30_SlotNestedBindThroughSymlink: binds apply in order, so one may lie below
// another (the shared bundle and its manifest do). bwrap creates and resolves a nested
// mount point inside the sandbox's new root; a slot builds the tree on the host. When the
// outer bind's source holds a symlink where the inner bind goes (a workspace is a clone of
// someone's repository), the slot must not follow it out of the staging tree: that would
// create directories in, and mount over, a host path of the repository's choosing.
func TestRedTeam30_SlotNestedBindThroughSymlink(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	hostTarget := filepath.Join(t.TempDir(), "host-target")
	if err := os.Mkdir(hostTarget, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostTarget, "host-file"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	outer, inner := t.TempDir(), t.TempDir()
	if err := os.Symlink(hostTarget, filepath.Join(outer, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(hostTarget, "made"), filepath.Join(outer, "deep")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inner, "inner-file"), []byte("inner"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"/agora/w/link", "/agora/w/deep/x"} {
		t.Run(filepath.Base(filepath.Dir(dst))+"-"+filepath.Base(dst), func(t *testing.T) {
			spec := compute.Spec{ID: "n", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"},
				Binds: []compute.Bind{{Src: outer, Dst: "/agora/w", Writable: true}, {Src: inner, Dst: dst}}}
			slot := newSlot(t, p, spec, o)
			h, err := p.StartInSlot(t.Context(), slot, spec)
			if err == nil {
				h.Wait()
			}
			mps, _ := host.MountsUnder(hostTarget)
			for _, mp := range mps {
				unix.Unmount(mp, unix.MNT_DETACH)
			}
			if len(mps) > 0 {
				t.Errorf("the slot mounted the inner bind over the host path the symlink names: %v", mps)
			}
			if _, err := os.Lstat(filepath.Join(hostTarget, "made")); err == nil {
				t.Errorf("the slot created a directory through the symlink, on the host: %s", filepath.Join(hostTarget, "made"))
				os.RemoveAll(filepath.Join(hostTarget, "made"))
			}
		})
	}
}

// TestRedTeam30_SlotFileBindUnderReadOnlyBind: a file bound over a file of a read-only bind
// (the shared bundle and the dispatch's manifest.json) runs warm as it runs cold: before, the
// slot opened the existing mount point to create it, failed with EROFS and the dispatch went
// cold every time.
func TestRedTeam30_SlotFileBindUnderReadOnlyBind(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	outer := t.TempDir()
	if err := os.WriteFile(filepath.Join(outer, "m"), []byte("shared placeholder"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "m")
	if err := os.WriteFile(f, []byte("per-dispatch"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := compute.Spec{ID: "f", Argv: []string{"cat", "/agora/b/m"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: outer, Dst: "/agora/b"}, {Src: f, Dst: "/agora/b/m"}}}
	cold := run(t, p, spec)
	warm := runInSlot(t, p, newSlot(t, p, spec, slotOpts(t)), spec)
	if cold.stdout != "per-dispatch" || warm.stdout != cold.stdout {
		t.Fatalf("cold %q, warm %q (stderr %q)", cold.stdout, warm.stdout, warm.stderr)
	}
}

// TestRedTeam30_ReapRemovesDeadHoldersCgroups: a slot's task cgroup is made at fill, named
// after the slot, not after any dispatch, so the dispatch sweep (Provider.Release by dispatch
// id) never finds it. After its holder is killed with -9, ReapSlots is the only sweep that
// knows the slot: it must remove the cgroup too, or each crash leaks one per slot.
func TestRedTeam30_ReapRemovesDeadHoldersCgroups(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	slot := newSlot(t, p, compute.Spec{ID: "cg", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}, o)
	if slot.h.cg == nil {
		slot.Discard()
		t.Skip("SKIP: no task cgroup can be made here, so none can leak")
	}
	cg := slot.h.cg.dir
	// The holder dies: the kernel drops its hold, and bwrap dies with it (die-with-parent).
	id, _ := parseTaskID(slot.TaskID())
	syscall.Kill(id.pid, syscall.SIGKILL)
	slot.h.cmd.Wait()
	slot.hold.Close()
	if err := ReapSlots(t.Context(), o.Dir); err != nil {
		t.Logf("ReapSlots: %v", err)
	}
	if _, err := os.Stat(cg); !errors.Is(err, os.ErrNotExist) {
		os.Remove(cg)
		t.Fatalf("the dead holder's slot cgroup %s outlived the sweep: %v", cg, err)
	}
}

// TestRedTeam30_SlotLimitsSameAsCold: the rlimits the command runs under, same spec, cold and
// warm (a slot's are applied at fill, to a sandbox started before the dispatch existed).
func TestRedTeam30_SlotLimitsSameAsCold(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	spec := compute.Spec{ID: "lim", Argv: []string{"cat", "/proc/self/limits"}, Env: []string{"PATH=/usr/bin:/bin"}, RunAs: testRunAs,
		Limits: compute.Limits{MaxProcs: 37, FileSize: 3 << 20, Memory: 700 << 20, Scratch: 5 << 20, Timeout: time.Minute}}
	cold := run(t, p, spec)
	warm := runInSlot(t, p, newSlot(t, p, spec, slotOpts(t)), spec)
	if cold.stdout == "" || cold.stdout != warm.stdout {
		t.Fatalf("rlimits differ:\ncold %s\nwarm %s (stderr %q)", cold.stdout, warm.stdout, warm.stderr)
	}
}
