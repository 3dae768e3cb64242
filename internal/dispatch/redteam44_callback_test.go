package dispatch_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// The callback outbox is written outside store.Tx (autocommit UPDATEs on the raw
// pool), so the leader fence, which store.Tx asks, never saw it: a supervisor whose serve lost
// its lease between recording its dispatch's end and delivering (cli deliverCallbacks), or a
// fenced `agora dispatch deliver`, POSTed the events and wrote agora.db. Now Flush sends
// nothing and marks nothing under a closed fence; once it opens (the leader), all is delivered.
// Failed before: three POSTs and three rows marked delivered under the closed fence.
func TestRedTeam44_FencedCourierSendsAndMarksNothing(t *testing.T) {
	e := newEnv(t)
	e.subagent("quick", `echo done`)
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer srv.Close()
	r := e.run(dispatch.Request{Subagent: "quick", CallbackURL: srv.URL + "/hook"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s: %s", r.State, r.Detail)
	}
	key, err := e.home.CallbackKey()
	if err != nil {
		t.Fatal(err)
	}
	allow := egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	c := dispatch.NewCourier(e.home.DB.SQL(), key, egress.NewDialer(allow, nil), time.Now)
	undelivered := func() int {
		var n int
		if err := e.home.DB.SQL().QueryRow(`SELECT count(*) FROM callback_outbox WHERE delivered_at = '' AND attempts = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := undelivered(); n != 3 {
		t.Fatalf("%d undelivered untried events, want 3", n)
	}

	fenceErr := errors.New("leader fence: leadership ended; refusing to commit")
	restore := store.SetFence(func() error { return fenceErr })
	delivered, _, err := c.Flush(t.Context(), "")
	restore()
	if !errors.Is(err, fenceErr) || delivered != 0 {
		t.Errorf("a fenced flush: delivered %d, %v; want 0 and the fence's refusal", delivered, err)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("a fenced flush POSTed %d callbacks", n)
	}
	if n := undelivered(); n != 3 {
		t.Errorf("a fenced flush wrote the outbox: %d events left untried, want 3", n)
	}

	if delivered, pending, err := c.Flush(t.Context(), ""); err != nil || delivered != 3 || pending != 0 {
		t.Errorf("an unfenced flush: delivered %d, pending %d, %v; want all 3", delivered, pending, err)
	}
}
