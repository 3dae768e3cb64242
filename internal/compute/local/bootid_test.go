package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// otherBoot is a boot id no real boot has had: what a later boot's id looks like to an id
// made in this one (and this boot's to an id made in an earlier one).
const otherBoot = "0123456789abcdef0123456789abcdef"

// asBoot makes the package see boot as the running boot's id until the returned func runs.
func asBoot(boot string) (restore func()) {
	prev := currentBoot
	currentBoot = func() string { return boot }
	return func() { currentBoot = prev }
}

// TestCurrentBoot_ThisBoot: the boot this package binds task ids to is the running boot's.
func TestCurrentBoot_ThisBoot(t *testing.T) {
	want, err := host.BootID()
	if err != nil {
		t.Skipf("SKIP: no boot id here: %v", err)
	}
	if currentBoot() != want {
		t.Errorf("currentBoot() = %q, want %q", currentBoot(), want)
	}
}

// TestCancel_OtherBootSignalsNothing: pids and start times restart at boot, so a task id
// read back from the database after a reboot (Reap's stopAndRelease cancels the dispatches
// whose supervisor died with the old boot) can name, pid and start time alike, a process
// group and a sandbox of the new boot. An id carries the boot it was made in, and Cancel
// signals nothing for an id of another boot, however well its pids and start times match.
// The sandbox here is a real one (bwrap leading its session, a nested pid namespace's
// first process): the exact match a stale id would meet. The same id cancelled in its own
// boot kills it, and so does its form from before boot ids (checked as it always was).
func TestCancel_OtherBootSignalsNothing(t *testing.T) {
	requireBwrap(t)
	boot, err := host.BootID()
	if err != nil {
		t.Skipf("SKIP: no boot id here: %v", err)
	}
	if boot == otherBoot {
		t.Fatalf("this boot's id is the test's made-up one")
	}
	for _, form := range []string{"current", "old"} {
		t.Run(form, func(t *testing.T) {
			p := newProvider(t, Options{})
			marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
			h, err := p.Start(t.Context(), compute.Spec{ID: "boot", Argv: []string{"sleep", marker}, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(func() { _ = p.Cancel(context.Background(), h.TaskID()); _, _ = h.Wait() })
			tid, err := parseTaskID(h.TaskID())
			if err != nil || tid.boot != boot || tid.init == 0 {
				t.Fatalf("task id %q (%+v, %v) does not carry the sandbox and this boot %q", h.TaskID(), tid, err, boot)
			}
			for deadline := time.Now().Add(10 * time.Second); sleepsWith(marker) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the sandbox's sleep %s never ran", marker)
				}
			}
			alive := func(what string) {
				t.Helper()
				time.Sleep(50 * time.Millisecond)
				select {
				case <-h.(*handle).done:
					t.Fatalf("%s: the task was killed", what)
				default:
				}
				if sleepsWith(marker) == 0 {
					t.Fatalf("%s: the sandbox's command was killed", what)
				}
			}
			// Made in an earlier boot: this boot's processes that match it are not its.
			stale := tid
			stale.boot = otherBoot
			if err := newProvider(t, Options{}).Cancel(t.Context(), stale.String()); err != nil {
				t.Errorf("Cancel(%s) = %v, want nil", stale, err)
			}
			alive("an id of an earlier boot")
			// The id made here, read back in a later boot (the seam stands for the reboot).
			func() {
				defer asBoot(otherBoot)()
				if err := newProvider(t, Options{}).Cancel(t.Context(), h.TaskID()); err != nil {
					t.Errorf("Cancel(%s) in a later boot = %v, want nil", h.TaskID(), err)
				}
			}()
			alive("this boot's id in a later boot")
			// A process that cannot read the running boot's id cannot tell: it signals nothing.
			func() {
				defer asBoot("")()
				if err := newProvider(t, Options{}).Cancel(t.Context(), h.TaskID()); err != nil {
					t.Errorf("Cancel(%s) with no boot id = %v, want nil", h.TaskID(), err)
				}
			}()
			alive("an id checked with no boot id")
			// The control: the same task cancelled in its own boot, by a provider that did not
			// start it (as Reap's), dies.
			id := h.TaskID()
			if form == "old" {
				old := tid
				old.boot = ""
				id = old.String()
				if strings.Count(id, ":") != 4 {
					t.Fatalf("old form %q is not local:<pid>:<start>:<init>:<start>", id)
				}
			}
			if err := newProvider(t, Options{}).Cancel(t.Context(), id); err != nil {
				t.Fatalf("Cancel(%s) = %v", id, err)
			}
			select {
			case <-h.(*handle).done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Cancel(%s) in its own boot left the task running", id)
			}
			for deadline := time.Now().Add(10 * time.Second); sleepsWith(marker) > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("Cancel(%s) in its own boot left the sandbox running", id)
				}
			}
		})
	}
}
