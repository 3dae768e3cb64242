package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// heldSandboxes lists the sandbox processes of this process's held bwraps: each bwrap child of
// this process's own bwrap children.
func heldSandboxes() []int {
	var out []int
	for _, b := range childrenOf(os.Getpid()) {
		if commOf(b) != "bwrap" {
			continue
		}
		for _, c := range childrenOf(b) {
			if commOf(c) == "bwrap" {
				out = append(out, c)
			}
		}
	}
	return out
}

// runningOf is processesOf without zombies, which run nothing (and whose parent, when it is
// not this process, may never reap them).
func runningOf(t *testing.T, uid uint32) []string {
	var out []string
	for _, pid := range processesOf(t, uid) {
		if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

func commOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// TestRedTeam43_FillOfAStoppedSandboxCancelled: NewSlot now waits, after releasing the held
// sandbox, until it has exec'd its command. A sandbox process that never does (stopped with
// SIGSTOP while held: its release byte waits unread) keeps NewSlot waiting; the fill's context
// ending must end that wait at once, and the fill must then leave nothing: no bwrap or
// sandbox process (the run-as thread and its namespace with them), no mount, no directory.
func TestRedTeam43_FillOfAStoppedSandboxCancelled(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := stageOpts(t, 8<<20)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stopped := 0
	mount := o.Stage.Mount
	o.Stage.Mount = func(dir string) error {
		// Called while the sandbox is held, before its release: stop it there.
		for _, pid := range heldSandboxes() {
			if unix.Kill(pid, unix.SIGSTOP) == nil {
				stopped = pid
			}
		}
		time.AfterFunc(300*time.Millisecond, cancel)
		return mount(dir)
	}
	start := time.Now()
	slot, err := p.NewSlot(ctx, stageTmpl(`true`, testRunAs), o)
	took := time.Since(start)
	if stopped == 0 {
		if slot != nil {
			slot.Discard()
		}
		t.Fatal("no held sandbox was found to stop: the test proves nothing")
	}
	if err == nil {
		slot.Discard()
		t.Fatalf("NewSlot returned a slot whose sandbox (pid %d, stopped) never ran its command", stopped)
	}
	if !errors.Is(err, context.Canceled) || took > 10*time.Second {
		t.Fatalf("NewSlot of a stopped sandbox, its context cancelled: %v after %v, want context.Canceled at once", err, took)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := runningOf(t, testRunAs.UID)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed fill left processes %v of the sandbox user (the stopped sandbox was %d)", left, stopped)
		}
	}
	if mps, err := host.MountsUnder(o.Dir); err != nil || len(mps) > 0 {
		t.Errorf("the failed fill left mounts %v (%v)", mps, err)
	}
	if ents, _ := os.ReadDir(o.Dir); len(ents) > 0 {
		t.Errorf("the failed fill left %d entries in %s (%s...)", len(ents), o.Dir, ents[0].Name())
	}
}

// TestRedTeam43_DeadSlotSaysLittleAndQuoted: a claim of a prestarted slot whose sandbox ended
// says what it wrote on its standard error (endedSaying), and the dispatcher logs that error
// ("warm slot failed; starting cold"). The sandbox writes it: terminal escapes, line breaks
// that forge log lines, and a flood must reach the message quoted and cut, never raw.
func TestRedTeam43_DeadSlotSaysLittleAndQuoted(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := prestartOpts(t)
	hostile := `printf '\033]0;owned\007\033[2J\rlevel=ERROR msg=forged-line\n\342\200\256txt.exe\n' >&2; ` +
		`head -c 4000 /dev/zero | tr '\0' A >&2; exit 3`
	tmpl := compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", hostile}, Env: []string{"PATH=/usr/bin:/bin"},
		Dir: "/agora/out", RunAs: testRunAs,
		Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}}
	slot := newSlot(t, p, tmpl, o)
	for deadline := time.Now().Add(10 * time.Second); slot.Alive(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			slot.Discard()
			t.Fatal("the prestarted command did not end")
		}
	}
	spec := tmpl
	spec.ID = "d1"
	spec.Binds = []compute.Bind{{Src: t.TempDir(), Dst: "/agora/out", Writable: true}}
	h, err := p.StartInSlot(t.Context(), slot, spec)
	if err == nil {
		h.Wait()
		t.Fatal("a claim of a slot whose sandbox ended succeeded")
	}
	msg := err.Error()
	t.Logf("claim error (%d bytes): %.300s...", len(msg), msg)
	if !strings.Contains(msg, "forged-line") {
		t.Fatalf("the claim's error does not say what the sandbox wrote: the test proves nothing: %q", msg)
	}
	for i, r := range msg {
		if r < 0x20 || r == 0x7f || r == '\u202e' {
			t.Fatalf("the claim's error holds %U at byte %d, raw from the sandbox: %q", r, i, msg)
		}
	}
	if len(msg) > 4*512+400 {
		t.Errorf("the claim's error is %d bytes: what the sandbox wrote is not cut", len(msg))
	}
}

// TestRedTeam43_FillAttachesOnlyToASetUpSandbox: bwrap reports its sandbox's pid (--info-fd)
// as soon as it has cloned it, and the sandbox then builds its root (its bind of the claim
// mount point at the claim root, remounted with bwrap's flags) before it waits on --block-fd.
// A fill that attaches the command's tree to the shared claim mount point meanwhile has it
// propagate into a sandbox still being built: stacked on the claim root between bwrap's bind
// and its remount, it made bwrap die with "Can't bind mount .../claim on /newroot/agora:
// Unable to remount destination ... Operation not permitted" (seen in TestSlotStage_Isolation
// SameAsCold once endedSaying worked), a dead slot. The sandbox is stopped here as soon as it
// exists; nothing may be attached to the slot until it has finished its setup.
func TestRedTeam43_FillAttachesOnlyToASetUpSandbox(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	for try := 0; ; try++ {
		if try == 20 {
			t.Skip("SKIP: the sandbox was never caught in its setup")
		}
		o := stageOpts(t, 8<<20)
		caught := make(chan int, 1)
		stop := make(chan struct{})
		go func() {
			defer close(caught)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if pid := newSandbox(); pid > 0 && unix.Kill(pid, unix.SIGSTOP) == nil {
					caught <- pid
					return
				}
			}
		}()
		type filled struct {
			slot *Slot
			err  error
		}
		done := make(chan filled, 1)
		go func() {
			s, err := p.NewSlot(t.Context(), stageTmpl(`true`, nil), o)
			done <- filled{s, err}
		}()
		var pid int
		select {
		case pid = <-caught:
		case f := <-done:
			close(stop)
			if pid, ok := <-caught; ok {
				unix.Kill(pid, unix.SIGCONT)
			}
			if f.err == nil {
				f.slot.Discard()
			}
			t.Logf("try %d: the fill was over before its sandbox was caught", try)
			continue
		}
		close(stop)
		early := len(stageMounts(o.Dir)) == 0 // nothing attached yet when it was stopped
		time.Sleep(20 * time.Millisecond)     // a stop is not at once
		sys, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		// Waiting on --block-fd (fd 6 here: the claim pipe is its one file): setup was over.
		setUp := strings.HasPrefix(string(sys), fmt.Sprintf("%d 0x6 ", unix.SYS_READ))
		var attached []string
		for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline) && len(attached) == 0; time.Sleep(2 * time.Millisecond) {
			attached = stageMounts(o.Dir)
		}
		unix.Kill(pid, unix.SIGCONT)
		f := <-done
		if f.err == nil {
			f.slot.Discard()
		}
		// Caught as it came out of clone(2), bwrap's launcher had not reported it yet, and
		// the fill waited for that anyway: too early to show anything.
		cloning := strings.HasPrefix(string(sys), fmt.Sprintf("%d ", unix.SYS_CLONE)) ||
			strings.HasPrefix(string(sys), fmt.Sprintf("%d ", unix.SYS_CLONE3))
		if setUp || !early || cloning {
			t.Logf("try %d: caught too early or too late (in %q)", try, strings.TrimSpace(string(sys)))
			continue // to show nothing: again
		}
		if len(attached) > 0 {
			t.Fatalf("the fill attached %v while its sandbox (pid %d, in %q) was still being set up", attached, pid, strings.TrimSpace(string(sys)))
		}
		if f.err != nil {
			t.Fatalf("NewSlot of a sandbox stopped during its setup for 300ms: %v", f.err)
		}
		t.Logf("try %d: stopped in %q: nothing attached meanwhile", try, strings.TrimSpace(string(sys)))
		return
	}
}

// stageMounts lists the command trees attached (attachTree's staging mounts) under dir.
func stageMounts(dir string) []string {
	var out []string
	mps, _ := host.MountsUnder(dir)
	for _, mp := range mps {
		if strings.Contains(mp, "/stage-") {
			out = append(out, mp)
		}
	}
	return out
}

// newSandbox returns the pid of a sandbox process of one of this process's bwraps that still
// runs bwrap (the kernel's per-thread children lists: a scan of /proc is too slow to catch a
// sandbox in its setup), 0 when there is none.
func newSandbox() int {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			kids, _ := os.ReadFile("/proc/" + f + "/task/" + f + "/children")
			for _, k := range strings.Fields(string(kids)) {
				if n, err := strconv.Atoi(k); err == nil && commOf(n) == "bwrap" {
					return n
				}
			}
		}
	}
	return 0
}
