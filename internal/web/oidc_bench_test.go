package web

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth"
)

// BenchmarkSessionCheck is the per-request session check: authenticator.who on a request
// carrying a session cookie, for a token's session (the baseline: the path every browser
// request took before) and a provider's session, among 2,000 live sessions of 1,000 subjects;
// and a bearer token's constant-time check beside them.
func BenchmarkSessionCheck(b *testing.B) {
	a := newAuthenticator([]mcpserver.Client{{Name: "alice", Token: opToken, Ceiling: mcpserver.CeilingOrchestrate}}, time.Now)
	until := time.Now().Add(time.Hour)
	for i := range 1000 {
		actor := "oidc:https://id.example#user" + strconv.Itoa(i)
		a.startSession(principal{name: actor}, actor, until)
		a.startSession(principal{name: actor}, actor, until)
	}
	cookie := func(id string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/runs", nil)
		r.AddCookie(&http.Cookie{Name: cookieName, Value: id})
		return r
	}
	bearer := httptest.NewRequest(http.MethodGet, "/api/runs", nil)
	bearer.Header.Set("Authorization", "Bearer "+opToken)
	for _, c := range []struct {
		name string
		r    *http.Request
	}{
		{"token session (baseline)", cookie(a.newSession(principal{name: "alice", operator: true}, 0))},
		{"provider session", cookie(a.startSession(principal{name: "oidc:https://id.example#u1", operator: true}, "oidc:https://id.example#u1", until))},
		{"bearer token", bearer},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := a.who(c.r); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkCallbackLocal is the callback's own work beside the provider's (BenchmarkWebSignIn
// in oidcauth): a flow kept and taken back, and a session started, among 1,000 pending flows.
func BenchmarkCallbackLocal(b *testing.B) {
	var f flows
	a := newAuthenticator(nil, time.Now)
	now := time.Now()
	for range 1000 {
		f.add(&flow{req: oidcauth.AuthRequest{State: randomToken()}, expires: now.Add(flowTTL)}, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		st := randomToken()
		f.add(&flow{req: oidcauth.AuthRequest{State: st, Nonce: randomToken(), Verifier: randomToken()}, expires: now.Add(flowTTL)}, now)
		if _, ok := f.take(st, now); !ok {
			b.Fatal("flow lost")
		}
		a.startSession(principal{name: "oidc:https://id.example#u1"}, "oidc:https://id.example#u1", now.Add(time.Hour))
	}
}
