package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// The attacks on a slot that stages ahead (slotstage.go): its claim's directories and
// quota are made and bound at fill, so a stage must belong to exactly one dispatch, show
// nothing of another, keep its quota binding, and leave nothing claimable when its holder is
// killed with -9 before the claim or in the middle of one.

// stageOpts are prestartOpts whose slots stage /agora/ro and /agora/rw ahead, rw on a tmpfs
// quota of quota bytes (as the dispatcher's disk quota).
func stageOpts(t testing.TB, quota int64) compute.WarmOptions {
	o := prestartOpts(t)
	o.Stage = &compute.SlotStage{Dirs: map[string]string{"/agora/ro": "ro", "/agora/rw": "q/rw"}, Quota: "q", Mount: func(dir string) error {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		return unix.Mount("agora-test-quota", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", quota))
	}}
	return o
}

// stageTmpl is the shape stageOpts' slots are filled with: script after the claim, in rw.
func stageTmpl(script string, runAs *compute.HostUser) compute.Spec {
	return compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", waitClaimSh + "unset CLAIM_FD; " + script}, Env: []string{"PATH=/usr/bin:/bin"},
		Dir: "/agora/rw", RunAs: runAs,
		Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/ro"}, {Src: "/nonexistent-at-fill", Dst: "/agora/rw", Writable: true}}}
}

// stagedSpec is tmpl bound to a taken stage's directories, as the dispatcher's spec is.
func stagedSpec(tmpl compute.Spec, st compute.Staged) compute.Spec {
	s := tmpl
	s.ID = "d1"
	s.Binds = []compute.Bind{{Src: st.Dirs["/agora/ro"], Dst: "/agora/ro"}, {Src: st.Dirs["/agora/rw"], Dst: "/agora/rw", Writable: true}}
	return s
}

func takeStage(t *testing.T, slot *Slot) (compute.Staged, func()) {
	t.Helper()
	st, release, ok := slot.TakeStage()
	if !ok {
		t.Fatal("TakeStage of a fresh staged slot: not ok")
	}
	t.Cleanup(release)
	return st, release
}

// TestSlotStage_ClaimMountsNothing: a staged slot's claim runs its command on the directories
// made at fill (what the host wrote there is read, what the command writes reaches the host)
// without mounting anything; the stage stays until its dispatch releases it, then the slot's
// directory goes with every mount in it.
func TestSlotStage_ClaimMountsNothing(t *testing.T) {
	requireSlots(t)
	for name, runAs := range map[string]*compute.HostUser{"invoker": nil, "runas": testRunAs} {
		t.Run(name, func(t *testing.T) {
			p := newProvider(t, Options{})
			tmpl := stageTmpl(`cat /agora/ro/in; echo made > /agora/rw/out; pwd`, runAs)
			slot := newSlot(t, p, tmpl, stageOpts(t, 8<<20))
			if !stageable(tmpl, slot.opts) || slot.stage == "" {
				t.Fatal("the template was not staged ahead")
			}
			st, release := takeStage(t, slot)
			if err := os.WriteFile(filepath.Join(st.Dirs["/agora/ro"], "in"), []byte("from-host\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if runAs != nil {
				// The dispatch hands its stage over; the slot made it the sandbox user's already.
				var sb unix.Stat_t
				if err := unix.Lstat(st.Dirs["/agora/rw"], &sb); err != nil || sb.Uid != runAs.UID {
					t.Fatalf("the staged rw is uid %d (%v), want the slot's %d", sb.Uid, err, runAs.UID)
				}
			}
			before, err := host.MountsUnder(slot.Dir())
			if err != nil {
				t.Fatal(err)
			}
			spec := stagedSpec(tmpl, st)
			var out, errOut syncBuffer
			spec.Stdout, spec.Stderr = &out, &errOut
			h, err := p.StartInSlot(t.Context(), slot, spec)
			if err != nil {
				t.Fatalf("StartInSlot: %v", err)
			}
			after, _ := host.MountsUnder(slot.Dir())
			exit, _ := h.Wait()
			if exit.Code != 0 || out.String() != "from-host\n/agora/rw\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q", exit.Code, out.String(), errOut.String())
			}
			if len(after) != len(before) {
				t.Errorf("the claim mounted: %d mounts under the slot before it, %d after\nbefore %v\nafter %v", len(before), len(after), before, after)
			}
			if b, _ := os.ReadFile(filepath.Join(st.Dirs["/agora/rw"], "out")); string(b) != "made\n" {
				t.Errorf("the host reads %q in the staged rw", b)
			}
			if _, err := os.Stat(slot.Dir()); err != nil {
				t.Fatalf("the stage went before its dispatch released it: %v", err)
			}
			release()
			if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
				m, _ := host.MountsUnder(slot.Dir())
				t.Fatalf("the released slot's directory remains (%v), mounts %v", err, m)
			}
		})
	}
}

// TestSlotStage_IsolationSameAsCold runs the isolation probe suite in a cold sandbox and in a
// staged slot of the same shape: every probe must exit the same.
func TestSlotStage_IsolationSameAsCold(t *testing.T) {
	requireSlots(t)
	t.Setenv("AGORA_TEST_HOST_CANARY", "host-canary-value")
	p := newProvider(t, Options{})
	hidden := filepath.Join(t.TempDir(), "hidden.txt")
	os.WriteFile(hidden, []byte("host-only"), 0o644)
	home, _ := os.UserHomeDir()
	for _, tc := range isolationCases(hidden, home, "/agora") {
		t.Run(tc.name, func(t *testing.T) {
			roDir, rwDir := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(roDir, "in.txt"), []byte("readable"), 0o644)
			tmpl := stageTmpl(tc.script, nil)
			cold := tmpl
			cold.Argv = []string{"sh", "-c", tc.script}
			cold.Binds = []compute.Bind{{Src: roDir, Dst: "/agora/ro"}, {Src: rwDir, Dst: "/agora/rw", Writable: true}}
			c := run(t, p, cold)
			slot := newSlot(t, p, tmpl, stageOpts(t, 64<<20))
			st, _ := takeStage(t, slot)
			os.WriteFile(filepath.Join(st.Dirs["/agora/ro"], "in.txt"), []byte("readable"), 0o644)
			w := runInSlot(t, p, slot, stagedSpec(tmpl, st))
			if c.exit.Code != tc.want || w.exit.Code != c.exit.Code {
				t.Errorf("%q: cold exit %d, staged exit %d, want %d (staged stderr %q)", tc.script, c.exit.Code, w.exit.Code, tc.want, w.stderr)
			}
			if w.exit.Isolation != c.exit.Isolation {
				t.Errorf("isolation: staged %q, cold %q", w.exit.Isolation, c.exit.Isolation)
			}
		})
	}
}

// TestSlotStage_BelongsToOneDispatch: a stage is handed out once; a claim runs only with the
// stage taken and only on exactly its directories (a spec naming another directory at a
// staged place, or a staged directory replaced at its path, is refused and the slot spent);
// and two slots' stages share nothing.
func TestSlotStage_BelongsToOneDispatch(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := stageOpts(t, 8<<20)
	tmpl := stageTmpl(`ls -A /agora/rw /agora/ro`, testRunAs)

	t.Run("TakenOnce", func(t *testing.T) {
		slot := newSlot(t, p, tmpl, o)
		defer slot.Discard()
		takeStage(t, slot)
		if _, _, ok := slot.TakeStage(); ok {
			t.Fatal("a second TakeStage of one slot was handed the same stage")
		}
	})
	t.Run("NotTaken", func(t *testing.T) {
		slot := newSlot(t, p, tmpl, o)
		dirs := compute.Staged{Dirs: map[string]string{}}
		for dst, d := range slot.staged {
			dirs.Dirs[dst] = d.path
		}
		if _, err := p.StartInSlot(t.Context(), slot, stagedSpec(tmpl, dirs)); !errors.Is(err, ErrSlotShape) {
			t.Fatalf("a claim of an untaken stage: %v, want ErrSlotShape", err)
		}
		if _, _, ok := slot.TakeStage(); ok {
			t.Error("the stage of a spent slot was handed out")
		}
		waitGone(t, slot.Dir())
	})
	t.Run("OtherDirectory", func(t *testing.T) {
		slot := newSlot(t, p, tmpl, o)
		st, release := takeStage(t, slot)
		spec := stagedSpec(tmpl, st)
		spec.Binds[1].Src = t.TempDir()
		if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotShape) {
			t.Fatalf("a claim binding another directory at /agora/rw: %v, want ErrSlotShape", err)
		}
		if _, err := p.StartInSlot(t.Context(), slot, stagedSpec(tmpl, st)); !errors.Is(err, ErrSlotClaimed) {
			t.Fatalf("the refused slot claimed again: %v, want ErrSlotClaimed", err)
		}
		if _, err := os.Stat(st.Dirs["/agora/rw"]); err != nil {
			t.Fatalf("the taken stage went with the refused claim (its dispatch may start cold on it): %v", err)
		}
		release()
		waitGone(t, slot.Dir())
	})
	t.Run("ReplacedAtItsPath", func(t *testing.T) {
		slot := newSlot(t, p, tmpl, o)
		st, release := takeStage(t, slot)
		defer release()
		rw := st.Dirs["/agora/rw"]
		if err := os.Rename(rw, rw+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(rw, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := p.StartInSlot(t.Context(), slot, stagedSpec(tmpl, st)); !errors.Is(err, ErrSlotShape) {
			t.Fatalf("a claim of a stage whose rw was replaced: %v, want ErrSlotShape", err)
		}
	})
	t.Run("TwoSlotsShareNothing", func(t *testing.T) {
		a, b := newSlot(t, p, tmpl, o), newSlot(t, p, tmpl, o)
		sa, _ := takeStage(t, a)
		sb, _ := takeStage(t, b)
		if err := os.WriteFile(filepath.Join(sa.Dirs["/agora/rw"], "a-only"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		var fa, fb unix.Statfs_t
		if err := unix.Statfs(sa.Dirs["/agora/rw"], &fa); err != nil {
			t.Fatal(err)
		}
		if err := unix.Statfs(sb.Dirs["/agora/rw"], &fb); err != nil {
			t.Fatal(err)
		}
		if sa.Root == sb.Root || fa.Fsid == fb.Fsid {
			t.Fatalf("two slots' stages share a root or a quota: %s %s, fsid %v %v", sa.Root, sb.Root, fa.Fsid, fb.Fsid)
		}
		w := runInSlot(t, p, b, stagedSpec(tmpl, sb))
		if w.exit.Code != 0 || strings.Contains(w.stdout, "a-only") {
			t.Fatalf("slot b's sandbox (exit %d) lists %q: it sees slot a's stage", w.exit.Code, w.stdout)
		}
		a.Discard()
	})
}

// TestSlotStage_QuotaBinds: the staged workspace lives on the stage's quota: writing past it
// stops at ENOSPC inside the sandbox, and the host holds no more than the quota.
func TestSlotStage_QuotaBinds(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	tmpl := stageTmpl(`dd if=/dev/zero of=/agora/rw/big bs=1M count=8 2>&1; echo "dd=$?"`, testRunAs)
	slot := newSlot(t, p, tmpl, stageOpts(t, 1<<20))
	st, _ := takeStage(t, slot)
	w := runInSlot(t, p, slot, stagedSpec(tmpl, st))
	if !strings.Contains(w.stdout, "No space left on device") || strings.Contains(w.stdout, "dd=0") {
		t.Fatalf("dd was not stopped by the staged quota:\n%s", w.stdout)
	}
	fi, err := os.Stat(filepath.Join(st.Dirs["/agora/rw"], "big"))
	if err != nil || fi.Size() > 1<<20 {
		t.Fatalf("the host holds %v bytes of the filler (%v), over the 1 MiB quota", fi.Size(), err)
	}
}

// TestSlotStage_HolderKilled: the process holding a staged slot is killed with -9, before
// any claim (its stage untouched) and in the middle of one (its stage taken and written, the
// command running): the sandbox dies with it, and ReapSlots takes the slot's directory with
// its stage, its quota's mount and what was written there. Nothing is left to claim.
func TestSlotStage_HolderKilled(t *testing.T) {
	requireSlots(t)
	for _, mode := range []string{"fill", "claim"} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "slots")
			cmd := exec.Command(os.Args[0], "-test.run=^TestSlotStage_HolderHelper$")
			// The holder is killed, so its own temporary directories are made in this test's.
			cmd.Env = append(os.Environ(), "AGORA_TEST_STAGE_HOLDER="+dir, "AGORA_TEST_STAGE_MODE="+mode, "TMPDIR="+t.TempDir())
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4096)
			n, _ := stdout.Read(buf)
			line := strings.TrimSpace(string(buf[:n]))
			f := strings.Fields(line)
			if len(f) != 3 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper said %q", line)
			}
			slotDir, tid, mark := f[0], f[1], f[2]
			if m, _ := host.MountsUnder(filepath.Join(slotDir, stageDirName)); len(m) == 0 {
				t.Errorf("no quota mounted in the live slot's stage: %v", m)
			}
			cmd.Process.Kill()
			cmd.Wait()
			id, err := parseTaskID(tid)
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, err := readProcStat(id.pid)
				if err != nil || st.start != id.start || isZombie(id.pid) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the slot's sandbox %s outlived its holder", tid)
				}
			}
			if err := ReapSlots(t.Context(), dir); err != nil {
				t.Fatal(err)
			}
			if m, _ := host.MountsUnder(slotDir); len(m) > 0 {
				t.Errorf("mounts of the killed holder's slot remain: %v", m)
			}
			if _, err := os.Stat(slotDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the killed holder's slot directory remains: %v", err)
			}
			if mark != "-" {
				if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the dispatch's file in the killed holder's stage remains: %v", err)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left in the slots' root after the sweep: %v", ents)
			}
		})
	}
}

// TestSlotStage_HolderHelper is the holder TestSlotStage_HolderKilled kills: it fills a staged
// slot and, in mode claim, takes the stage, writes a file there and runs a long command in it.
func TestSlotStage_HolderHelper(t *testing.T) {
	dir := os.Getenv("AGORA_TEST_STAGE_HOLDER")
	if dir == "" {
		t.Skip("SKIP: helper process of TestSlotStage_HolderKilled only")
	}
	p := newProvider(t, Options{})
	o := stageOpts(t, 8<<20)
	o.Dir = dir
	tmpl := stageTmpl(`sleep 60`, testRunAs)
	slot := newSlot(t, p, tmpl, o)
	mark := "-"
	if os.Getenv("AGORA_TEST_STAGE_MODE") == "claim" {
		st, _, ok := slot.TakeStage()
		if !ok {
			t.Fatal("TakeStage")
		}
		mark = filepath.Join(st.Dirs["/agora/rw"], "dispatch-work")
		if err := os.WriteFile(mark, []byte("the dispatch's work"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := p.StartInSlot(t.Context(), slot, stagedSpec(tmpl, st)); err != nil {
			t.Fatal(err)
		}
	}
	os.Stdout.WriteString(slot.Dir() + " " + slot.TaskID() + " " + mark + "\n")
	agoratest.Hang() // until the test kills it
}

// waitGone waits for a spent slot's directory to be removed (its teardown).
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			m, _ := host.MountsUnder(dir)
			t.Fatalf("the spent slot's directory %s remains, mounts %v", dir, m)
		}
	}
}

// TestSlotStage_FillReturnsWithTheCommandRunning: a staged slot is handed out only once its
// sandbox runs the command. The dispatch re-owns the staged directories (root's, 0700) to
// fill them the moment it takes the stage; a slot returned while bwrap is still to enter its
// working directory there dies with "Can't chdir to /agora/rw: Permission denied" and its claim
// finds it dead (1 fill in 4 under load).
func TestSlotStage_FillReturnsWithTheCommandRunning(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	bwrap, err := os.Stat(p.bwrap)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		tmpl := stageTmpl(`pwd`, testRunAs)
		slot := newSlot(t, p, tmpl, stageOpts(t, 8<<20))
		exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", slot.h.sandboxPID))
		if err != nil {
			t.Fatalf("fill %d: the sandbox's first process: %v", i, err)
		}
		if os.SameFile(exe, bwrap) {
			t.Fatalf("fill %d: NewSlot returned while the sandbox's first process was bwrap still", i)
		}
		st, _ := takeStage(t, slot)
		// As the dispatch does at once (newStageFrom), then gives them back (handOver).
		rw := st.Dirs["/agora/rw"]
		if err := os.Lchown(rw, 0, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // what a fill of the workspace takes, at the least
		if err := os.Lchown(rw, int(testRunAs.UID), int(testRunAs.GID)); err != nil {
			t.Fatal(err)
		}
		spec := stagedSpec(tmpl, st)
		var out, errOut syncBuffer
		spec.Stdout, spec.Stderr = &out, &errOut
		h, err := p.StartInSlot(t.Context(), slot, spec)
		if err != nil {
			t.Fatalf("fill %d: claim: %v", i, err)
		}
		if exit, _ := h.Wait(); exit.Code != 0 || out.String() != "/agora/rw\n" {
			t.Fatalf("fill %d: exit %d, stdout %q, stderr %q", i, exit.Code, out.String(), errOut.String())
		}
	}
}
