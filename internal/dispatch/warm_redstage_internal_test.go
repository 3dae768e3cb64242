package dispatch

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// endedHandle is a warm claim's handle whose process tree is gone (Exited returns) while the
// provider's teardown of its host side (Wait) has not finished until done is closed.
type endedHandle struct{ done chan struct{} }

func (h *endedHandle) TaskID() string                { return "task" }
func (h *endedHandle) Exited() (compute.Exit, error) { return compute.Exit{}, nil }
func (h *endedHandle) Wait() (compute.Exit, error)   { <-h.done; return compute.Exit{}, nil }
func (h *endedHandle) waited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// TestRedStage_LeaseAfterStageTeardown: a staged dispatch's end lets go of the slot's stage,
// and the uid lease after it, only once the slot's sandbox is torn down (its handle's Wait
// returned: the local slot lets go of its own hold on the stage there). Released at Exited,
// the stage's release would not be the last one (the slot's monitor holds it), so the uid
// would go back while the stage, holding the agent's files as that uid, and the sandbox's
// mount namespace are still up, and a holder killed then would leave the stage to the sweep
// with the uid already free.
func TestRedStage_LeaseAfterStageTeardown(t *testing.T) {
	dir := t.TempDir()
	const id = "01JB0000000000000000000000"
	lease, err := leaseUID(dir, 100000, id)
	if err != nil {
		t.Fatal(err)
	}
	h := &endedHandle{done: make(chan struct{})}
	st := stageAt(dir, id)
	early := make(chan bool, 1)
	st.release = func() { early <- !h.waited() }
	d := &Dispatcher{StateDir: dir, Warm: &WarmPools{}}
	s := &supervision{d: d, handle: h, st: st, lease: lease}
	s.cleanup()
	// The cleanup's background part has every chance to run meanwhile; the handle's Wait has
	// not returned, so neither the stage nor the lease may go yet.
	select {
	case <-early:
		t.Fatal("the stage was released before the slot's sandbox was torn down (its handle's Wait)")
	case <-time.After(200 * time.Millisecond):
	}
	if leaseFree(t, dir, lease.uid) {
		t.Fatal("the uid lease went back before the slot's sandbox was torn down")
	}
	close(h.done)
	d.Warm.teardowns.Wait()
	if e := <-early; e {
		t.Fatal("the stage was released before the handle's Wait returned")
	}
	if !leaseFree(t, dir, lease.uid) {
		t.Fatal("the uid lease was not given back after the stage's teardown")
	}
}

// leaseFree says whether uid's lease file under stateDir can be locked now.
func leaseFree(t *testing.T, stateDir string, uid uint32) bool {
	t.Helper()
	f, err := os.Open(filepath.Join(stateDir, uidLeaseDir, strconv.FormatUint(uint64(uid), 10)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}
