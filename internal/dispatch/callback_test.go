package dispatch_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
)

type delivery struct {
	id, stamp, sig string
	body           []byte
}

// TestCallbacks_SignedDurableRetried: every lifecycle event of a dispatch with a callback
// lands in the outbox in the same transaction, is POSTed with a valid HMAC signature through
// the egress dialer, and a failed delivery is retried until it succeeds.
func TestCallbacks_SignedDurableRetried(t *testing.T) {
	e := newEnv(t)
	e.subagent("quick", `echo done`)
	var mu sync.Mutex
	var got []delivery
	var fails atomic.Int32
	fails.Store(2) // the first two POSTs fail: the outbox must keep them
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if fails.Add(-1) >= 0 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got = append(got, delivery{r.Header.Get(dispatch.HeaderID), r.Header.Get(dispatch.HeaderTimestamp), r.Header.Get(dispatch.HeaderSignature), body})
		mu.Unlock()
	}))
	defer srv.Close()

	r := e.run(dispatch.Request{Subagent: "quick", CallbackURL: srv.URL + "/hook"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s: %s", r.State, r.Detail)
	}
	key, err := e.home.CallbackKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }

	// Without an allow-list, the loopback receiver is refused by the egress dialer.
	denied := dispatch.NewCourier(e.home.DB.SQL(), key, egress.NewDialer(egress.Policy{}, nil), clock)
	if n, pending, err := denied.Flush(t.Context(), ""); err != nil || n != 0 || pending != 3 {
		t.Fatalf("flush without allow-list: delivered %d pending %d err %v; want 0, 3", n, pending, err)
	}

	allow := egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	c := dispatch.NewCourier(e.home.DB.SQL(), key, egress.NewDialer(allow, nil), clock)
	for i := 0; i < 10; i++ {
		now = now.Add(time.Hour) // past any backoff
		if _, pending, err := c.Flush(t.Context(), ""); err != nil {
			t.Fatal(err)
		} else if pending == 0 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3 (accepted, started, finished)", len(got))
	}
	var kinds []string
	for _, d := range got {
		if !dispatch.Verify(key, d.id, d.stamp, d.body, d.sig) {
			t.Errorf("delivery %s: signature does not verify", d.id)
		}
		if dispatch.Verify(key, d.id, d.stamp, append(d.body, ' '), d.sig) {
			t.Errorf("delivery %s: a changed body still verifies", d.id)
		}
		var ev struct {
			DispatchID string `json:"dispatch_id"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.DispatchID != r.ID {
			t.Errorf("delivery for %s, want %s", ev.DispatchID, r.ID)
		}
		kinds = append(kinds, ev.Kind)
	}
	want := []string{"accepted", "started", "finished"}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	// Delivered rows are not sent again.
	now = now.Add(time.Hour)
	if n, pending, _ := c.Flush(t.Context(), ""); n != 0 || pending != 0 {
		t.Fatalf("second flush delivered %d, pending %d; want nothing", n, pending)
	}
}
