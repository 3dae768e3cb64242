package dispatch_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// outliving is a provider whose tasks outlive their supervisor, as a Kubernetes Job does:
// Adopt follows the task Start made (or finds none once gone is set) and counts its calls,
// Cancel records what it stopped. An adopted handle ends when the test closes end; Start's
// ends only at the test's cleanup (cut), as if the supervisor that started the task were
// dead: in this process it still runs, and ending with the task it would record the
// dispatch's end (and release its stage) under the adopter, which a dead one never does.
type outliving struct {
	mu        sync.Mutex
	adopts    int
	gone      bool
	cancelled []string
	end       chan struct{} // closes every adopted handle
	cut       chan struct{} // closes Start's handles; orphan's cleanup closes it
}

type outlivingHandle struct {
	id  string
	end chan struct{}
}

func (h *outlivingHandle) TaskID() string { return h.id }
func (h *outlivingHandle) Wait() (compute.Exit, error) {
	<-h.end
	return compute.Exit{Code: 0, Isolation: "test"}, nil
}

func (p *outliving) Start(_ context.Context, s compute.Spec) (compute.Handle, error) {
	return &outlivingHandle{id: "job/" + s.ID, end: p.cut}, nil
}

func (p *outliving) Adopt(_ context.Context, s compute.Spec) (compute.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adopts++
	if p.gone {
		return nil, nil
	}
	return &outlivingHandle{id: "job/" + s.ID, end: p.end}, nil
}

func (p *outliving) Cancel(_ context.Context, task string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelled = append(p.cancelled, task)
	return nil
}

// orphan starts a dispatch of target "box" on an outliving provider in this process, then
// makes its recorded supervisor a process that is gone, as when the supervisor is killed
// while its worker runs on. The supervision started here is left waiting for its handle
// (p.cut, closed by the test's cleanup); it never records an end before the test's reapers do.
func orphan(t *testing.T, e *env, p *outliving) *dispatch.Record {
	t.Helper()
	if p.cut == nil {
		p.cut = make(chan struct{})
	}
	tg := e.home.Config.Targets[config.DefaultTarget]
	tg.Provider = config.ProviderDocker
	tg.Image = "box@sha256:" + strings.Repeat("ab", 32)
	e.home.Config.Targets["box"] = tg
	e.d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) { return p, nil }
	e.subagent("work", "true")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "work", Target: "box", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() {
		defer close(first)
		e.d.Supervise(context.Background(), r.ID, nil)
	}()
	t.Cleanup(func() {
		select {
		case <-p.cut:
		default:
			close(p.cut)
		}
		<-first
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cur, err := e.d.Records.Get(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State == lifecycle.DispatchStarted {
			break
		}
		if lifecycle.DispatchEnded(cur.State) || time.Now().After(deadline) {
			t.Fatalf("dispatch not started: %s %s %s", cur.State, cur.Reason, cur.Detail)
		}
	}
	// pid 2^22+1 is above any pid_max: no such process runs.
	if _, err := e.home.DB.SQL().Exec(`UPDATE dispatches SET supervisor = '4194305:1' WHERE id = ?`, r.ID); err != nil {
		t.Fatal(err)
	}
	return r
}

func adoptedEntries(t *testing.T, e *env, id string) int {
	t.Helper()
	var n int
	if err := e.home.DB.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = 'dispatch.adopted' AND subject = ?`, "dispatch/"+id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAdopt_TwoReapersOneAdopter: two supervisor hosts (each with its own connection to
// agora.db) reap at once, eight times each, a dispatch whose supervisor died while its
// worker runs on. Exactly one adopts it: one dispatch.adopted entry, one Adopt of the task,
// never a Start; the adopter follows the task to its end and records it once, not lost.
func TestAdopt_TwoReapersOneAdopter(t *testing.T) {
	e := newEnv(t)
	p := &outliving{end: make(chan struct{})}
	r := orphan(t, e, p)
	db2, err := store.Open(t.Context(), filepath.Join(e.home.Dir, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	one, two := *e.d, *e.d
	one.Adopt = &dispatch.Adoption{Role: "serve"}
	two.Adopt = &dispatch.Adoption{Role: "serve"}
	two.Records = dispatch.NewRecords(db2, audit.New(nil), nil)
	var wg sync.WaitGroup
	for i := range 16 {
		d := &one
		if i%2 == 1 {
			d = &two
		}
		wg.Go(func() {
			if _, err := d.Reap(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := adoptedEntries(t, e, r.ID); n != 1 {
		t.Errorf("%d dispatch.adopted entries, want 1", n)
	}
	close(p.end) // the worker ends
	one.Adopt.Wait()
	two.Adopt.Wait()
	p.mu.Lock()
	adopts := p.adopts
	p.mu.Unlock()
	if adopts != 1 {
		t.Errorf("the task was adopted %d times, want once", adopts)
	}
	cur, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Exit 0 without a result: worker-failed, the worker's own end, not lost.
	if cur.State != lifecycle.DispatchFailed || cur.Reason != lifecycle.ReasonWorkerFailed {
		t.Errorf("adopted dispatch ended %s/%s (%s), want failed/worker-failed", cur.State, cur.Reason, cur.Detail)
	}
	terminal := 0
	for _, ev := range cur.Events {
		if lifecycle.DispatchEnded(ev.Kind) {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("%d terminal events, want 1", terminal)
	}
}

// TestAdopt_OneShotReaperWaitsThenStops: a process that is no supervisor host (a one-shot
// CLI) leaves the orphan live for [dispatch.OrphanWait], then stops its worker and records
// it lost, naming why; a supervisor host that finds the task gone records it lost too, and
// stops whatever is left of it.
func TestAdopt_OneShotReaperWaitsThenStops(t *testing.T) {
	e := newEnv(t)
	p := &outliving{end: make(chan struct{})}
	defer close(p.end)
	r := orphan(t, e, p)
	if n, err := e.d.Reap(t.Context()); err != nil || n != 0 {
		t.Fatalf("one-shot reap: %d, %v; want the orphan left live", n, err)
	}
	if cur, _ := e.d.Records.Get(t.Context(), r.ID); cur.State != lifecycle.DispatchStarted {
		t.Fatalf("orphan %s after a one-shot reap, want started", cur.State)
	}
	old := dispatch.OrphanWait
	dispatch.OrphanWait = 50 * time.Millisecond
	defer func() { dispatch.OrphanWait = old }()
	time.Sleep(60 * time.Millisecond)
	if n, err := e.d.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("one-shot reap after the wait: %d, %v; want the orphan ended", n, err)
	}
	cur, _ := e.d.Records.Get(t.Context(), r.ID)
	if cur.Reason != lifecycle.ReasonLost || !strings.Contains(cur.Detail, "no agora orch serve adopted its worker") {
		t.Errorf("orphan ended %s/%s: %s", cur.State, cur.Reason, cur.Detail)
	}
	p.mu.Lock()
	if len(p.cancelled) != 1 || p.cancelled[0] != "job/"+r.ID || p.adopts != 0 {
		t.Errorf("cancelled %v, adopted %d times; want its task stopped, never adopted", p.cancelled, p.adopts)
	}
	p.mu.Unlock()

	// A supervisor host whose Adopt finds no task: lost, and the task is stopped.
	gone := &outliving{end: make(chan struct{}), gone: true}
	defer close(gone.end)
	r2 := orphan(t, e, gone)
	host := *e.d
	host.Adopt = &dispatch.Adoption{Role: "serve"}
	if _, err := host.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	host.Adopt.Wait()
	cur, _ = e.d.Records.Get(t.Context(), r2.ID)
	if cur.Reason != lifecycle.ReasonLost || !strings.Contains(cur.Detail, "could not be adopted: its worker is gone") {
		t.Errorf("dispatch whose task is gone ended %s/%s: %s", cur.State, cur.Reason, cur.Detail)
	}
	gone.mu.Lock()
	if gone.adopts != 1 || len(gone.cancelled) != 1 {
		t.Errorf("adopted %d times, cancelled %v; want one look and the task stopped", gone.adopts, gone.cancelled)
	}
	gone.mu.Unlock()
}

// TestAdopt_StaleOneShotReaperLosesToAdopter: a one-shot reaper that read an orphan's dead
// supervisor, and waited OrphanWait, ends it only through the same compare-and-set an
// adoption makes: a serve that adopted it in between keeps it (its Job is not stopped under
// it).
func TestAdopt_StaleOneShotReaperLosesToAdopter(t *testing.T) {
	e := newEnv(t)
	p := &outliving{end: make(chan struct{})}
	r := orphan(t, e, p)
	host := *e.d
	host.Adopt = &dispatch.Adoption{Role: "serve"}
	if _, err := host.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	took, err := dispatch.TakeOrphan(t.Context(), e.d.Records, r.ID, "4194305:1")
	if err != nil || took {
		t.Errorf("a stale reaper took the adopted dispatch: %v, %v", took, err)
	}
	close(p.end)
	host.Adopt.Wait()
	cur, _ := e.d.Records.Get(t.Context(), r.ID)
	if cur.Reason == lifecycle.ReasonLost || adoptedEntries(t, e, r.ID) != 1 {
		t.Errorf("adopted dispatch ended %s/%s (%s)", cur.State, cur.Reason, cur.Detail)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cancelled) != 0 {
		t.Errorf("the adopted task was stopped: %v", p.cancelled)
	}
}

// TestAdopt_AdoptOrphansEndsNothing: serve's loop adopts a started orphan and leaves an
// accepted dispatch whose supervisor died as it is (the orchestrator's Watch starts a new
// supervisor for it, which adopts its Job if one was made; recording it lost would run its
// task twice).
func TestAdopt_AdoptOrphansEndsNothing(t *testing.T) {
	e := newEnv(t)
	p := &outliving{end: make(chan struct{})}
	r := orphan(t, e, p)
	acc, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "work", Target: "box", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.home.DB.SQL().Exec(`UPDATE dispatches SET supervisor = '4194305:1' WHERE id = ?`, acc.ID); err != nil {
		t.Fatal(err)
	}
	host := *e.d
	host.Adopt = &dispatch.Adoption{Role: "serve"}
	if n, err := host.AdoptOrphans(t.Context()); err != nil || n != 1 {
		t.Errorf("AdoptOrphans = %d, %v; want the started orphan", n, err)
	}
	close(p.end)
	host.Adopt.Wait()
	if cur, _ := e.d.Records.Get(t.Context(), acc.ID); cur.State != lifecycle.DispatchAccepted {
		t.Errorf("the accepted dispatch whose supervisor died is %s/%s after AdoptOrphans, want accepted", cur.State, cur.Reason)
	}
	if adoptedEntries(t, e, r.ID) != 1 {
		t.Error("the started orphan was not adopted")
	}
	if _, err := e.d.Records.Finish(t.Context(), acc.ID, dispatch.Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled}); err != nil {
		t.Fatal(err)
	}
}
