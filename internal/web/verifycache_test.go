package web

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestVerifyCache_OnceThenKept(t *testing.T) {
	clk := &clock{t: time.Unix(2e9, 0)}
	var calls atomic.Int32
	release := make(chan struct{})
	c := newVerifyCache(func(ctx context.Context, run api.Run) (*verify.Report, error) {
		calls.Add(1)
		<-release
		return &verify.Report{OK: true, Tier: verify.TierTamperDetecting, Checks: []verify.Result{{Check: "orch checkpoint", OK: true, Detail: "signed"}}}, nil
	}, clk.now)
	run := api.Run{ID: "r1", Sealed: true}
	// A slow verification: the page says so rather than hang, and a second load starts none.
	if v := c.get(t.Context(), run, 20*time.Millisecond); !v.Pending {
		t.Fatalf("first load %+v, want pending", v)
	}
	if v := c.get(t.Context(), run, 20*time.Millisecond); !v.Pending {
		t.Fatalf("second load %+v, want pending", v)
	}
	close(release)
	// A load while it runs does not wait for it (only the one that started it does).
	v := c.get(t.Context(), run, time.Second)
	for deadline := time.Now().Add(5 * time.Second); v.Pending && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		v = c.get(t.Context(), run, time.Second)
	}
	if !v.OK || v.Pending || v.Tier != verify.TierTamperDetecting || len(v.Lines) != 1 || !strings.HasPrefix(v.Lines[0], "pass orch checkpoint") {
		t.Fatalf("after it ended %+v, want verified with one line", v)
	}
	for range 5 {
		c.get(t.Context(), run, time.Second)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d verifications for 8 loads, want 1", n)
	}
	clk.add(verifyTTL + time.Second)
	c.get(t.Context(), run, time.Second)
	if n := calls.Load(); n != 2 {
		t.Errorf("%d verifications after the TTL, want 2", n)
	}
}

func TestVerifyCache_FailureAndError(t *testing.T) {
	c := newVerifyCache(func(ctx context.Context, run api.Run) (*verify.Report, error) {
		if run.ID == "broken" {
			return nil, errors.New("orch.db is locked")
		}
		return &verify.Report{OK: false, Tier: verify.TierNone, Checks: []verify.Result{
			{Check: "orch checkpoint", OK: true},
			{Check: "dispatches entry", Item: "#7", OK: false, Detail: "hash mismatch"},
			{Check: "provenance", OK: false, Detail: "later"},
		}}, nil
	}, time.Now)
	v := c.get(t.Context(), api.Run{ID: "tampered"}, time.Second)
	if v.OK || v.Reason != "dispatches entry #7: hash mismatch" || len(v.Lines) != 3 || !strings.HasPrefix(v.Lines[1], "FAIL dispatches entry #7") {
		t.Errorf("a failed check: %+v", v)
	}
	v = c.get(t.Context(), api.Run{ID: "broken"}, time.Second)
	if v.OK || !strings.Contains(v.Reason, "could not be exported: orch.db is locked") {
		t.Errorf("an export error: %+v", v)
	}
}

func TestVerifyCache_Bounded(t *testing.T) {
	c := newVerifyCache(func(context.Context, api.Run) (*verify.Report, error) { return &verify.Report{OK: true}, nil }, time.Now)
	for i := range 3 * maxVerified {
		c.get(t.Context(), api.Run{ID: "r" + string(rune('a'+i%26)) + strings.Repeat("x", i)}, time.Second)
	}
	if n := len(c.runs); n > maxVerified {
		t.Errorf("%d runs kept, want at most %d", n, maxVerified)
	}
}

// TestRunPage_ShowsVerification renders the run page's verification states as a person sees
// them: verified with its tier, NOT verified with the reason (escaped), and still running.
func TestRunPage_ShowsVerification(t *testing.T) {
	p, err := newPages()
	if err != nil {
		t.Fatal(err)
	}
	run := api.Run{ID: "r1", Name: "demo", State: lifecycle.RunSucceeded, Sealed: true}
	for _, c := range []struct {
		v    verifyView
		want []string
		not  []string
	}{
		{verifyView{OK: true, Tier: verify.TierTamperDetecting, Lines: []string{"pass a: b"}}, []string{"Run bundle: verified", verify.TierTamperDetecting, "1 checks"}, []string{"NOT"}},
		{verifyView{Reason: "dispatches entry #7: <b>hash</b> mismatch", Lines: []string{"FAIL x"}}, []string{"Run bundle: NOT verified", `<span id="verify-reason">dispatches entry #7: &lt;b&gt;hash&lt;/b&gt; mismatch</span>`, `class="verify bad"`}, []string{"<b>hash"}},
		{verifyView{Pending: true}, []string{"Run bundle: verifying", `class="verify pending"`}, []string{"NOT"}},
	} {
		w := httptest.NewRecorder()
		v := c.v
		p.render(w, "run", pageData{Title: "Run", Who: "alice", Body: runView{Run: run, Verified: &v, Prev: -1, Next: -1}})
		body := w.Body.String()
		for _, s := range c.want {
			if !strings.Contains(body, s) {
				t.Errorf("%+v: page lacks %q", c.v, s)
			}
		}
		for _, s := range c.not {
			if strings.Contains(body, s) {
				t.Errorf("%+v: page has %q", c.v, s)
			}
		}
	}
}

// TestPages_ShowTraceID: a run's and a dispatch's trace id (recorded when traces are
// exported) is on their pages, to find the trace in the tracing backend.
func TestPages_ShowTraceID(t *testing.T) {
	p, err := newPages()
	if err != nil {
		t.Fatal(err)
	}
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	w := httptest.NewRecorder()
	p.render(w, "run", pageData{Title: "Run", Body: runView{Run: api.Run{ID: "r1", TraceID: tid}, Prev: -1, Next: -1}})
	if !strings.Contains(w.Body.String(), `id="run-trace">`+tid) {
		t.Error("the run page lacks the run's trace id")
	}
	w = httptest.NewRecorder()
	p.render(w, "dispatch", pageData{Title: "Dispatch", Body: &dispatchView{Rec: &dispatch.Record{ID: "d1", TraceID: tid}}})
	if !strings.Contains(w.Body.String(), `id="d-trace">`+tid) {
		t.Error("the dispatch page lacks the dispatch's trace id")
	}
	w = httptest.NewRecorder()
	p.render(w, "dispatch", pageData{Title: "Dispatch", Body: &dispatchView{Rec: &dispatch.Record{ID: "d1"}}})
	if strings.Contains(w.Body.String(), "d-trace") {
		t.Error("a dispatch without a trace shows a trace row")
	}
}
