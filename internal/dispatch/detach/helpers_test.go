package detach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// fakeRecords keeps records in memory. A supervisor script marks its dispatch started by
// creating dir/started-ID, which the next Get sees, as a real supervisor's Started would be.
type fakeRecords struct {
	dir string

	mu   sync.Mutex
	recs map[string]*dispatch.Record // guarded by mu
	// supervising: what Supervisor says of a started dispatch's supervisor. An accepted one's
	// is always gone, so Watch starts one whenever it has no child of its own.
	supervising bool               // guarded by mu
	finished    []dispatch.Outcome // guarded by mu
}

func newFakeRecords(dir string, recs ...*dispatch.Record) *fakeRecords {
	f := &fakeRecords{dir: dir, recs: map[string]*dispatch.Record{}}
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	return f
}

func (f *fakeRecords) Get(_ context.Context, id string) (*dispatch.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok {
		return nil, dispatch.ErrNotFound
	}
	if _, err := os.Stat(filepath.Join(f.dir, "started-"+id)); err == nil && r.State == lifecycle.DispatchAccepted {
		r.State = lifecycle.DispatchStarted
	}
	c := *r
	return &c, nil
}

func (f *fakeRecords) Supervisor(_ context.Context, id string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok {
		return "", false, dispatch.ErrNotFound
	}
	alive := r.State == lifecycle.DispatchStarted && f.supervising
	return "1234:5678", alive, nil
}

func (f *fakeRecords) Finish(_ context.Context, id string, o dispatch.Outcome) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok {
		return false, dispatch.ErrNotFound
	}
	if lifecycle.DispatchEnded(r.State) {
		return false, nil
	}
	r.State, r.Reason, r.Detail = o.State, o.Reason, o.Detail
	f.finished = append(f.finished, o)
	return true, nil
}

func (f *fakeRecords) setSupervising(v bool) {
	f.mu.Lock()
	f.supervising = v
	f.mu.Unlock()
}

func (f *fakeRecords) outcomes() []dispatch.Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dispatch.Outcome(nil), f.finished...)
}

// lostReaper ends every started dispatch as lost, as dispatch.Dispatcher.Reap does for one
// whose supervisor is gone, and counts its calls.
type lostReaper struct {
	f *fakeRecords

	mu    sync.Mutex
	calls int // guarded by mu
}

func (r *lostReaper) Reap(ctx context.Context) (int, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	r.f.mu.Lock()
	var ids []string
	for id, rec := range r.f.recs {
		if rec.State == lifecycle.DispatchStarted {
			ids = append(ids, id)
		}
	}
	r.f.mu.Unlock()
	for _, id := range ids {
		if _, err := r.f.Finish(ctx, id, dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonLost}); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

func (r *lostReaper) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// fakeAgora writes an executable stand-in for the agora binary into dir. It refuses any
// command but `dispatch supervise ID`, appends its pid to dir/spawns, then runs body (ID is
// $3). Every process it starts is killed when the test ends: they run in sessions of their
// own, so nothing else would.
func fakeAgora(t *testing.T, dir, body string) string {
	t.Helper()
	bin := filepath.Join(dir, "agora")
	script := "#!/bin/sh\n" +
		"[ \"$1 $2\" = 'dispatch supervise' ] && [ $# -eq 3 ] || exit 64\n" +
		"echo $$ >> '" + dir + "/spawns'\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range spawned(t, dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return bin
}

// spawned returns the pids of the supervisors fakeAgora ran so far, oldest first.
func spawned(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "spawns"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, l := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("spawns: %v", err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitReaped waits until pid is gone from /proc: killed AND waited for. A child nobody waits
// for stays there as a zombie.
func waitReaped(t *testing.T, pid int) {
	t.Helper()
	agoratest.WaitFor(t, 10*time.Second, "process "+strconv.Itoa(pid)+" to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return errors.Is(err, os.ErrNotExist)
	})
}

func accepted(id string) *dispatch.Record {
	return &dispatch.Record{ID: id, State: lifecycle.DispatchAccepted}
}
