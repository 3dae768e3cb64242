package web

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// OIDC is the web view's sign-in from an OpenID Connect provider (auth.oidc.web): the
// authorization code flow with PKCE (S256), state and nonce; the ID token is validated by
// Verifier (oidcauth.NewWeb: the web client id is its audience) and its claims mapped to a
// role by auth.oidc's rules. Static tokens keep working beside it.
type OIDC struct {
	Verifier *oidcauth.Verifier
	// Secret is the client secret, "" for a public client. It is sent to the token endpoint
	// only, never logged.
	Secret string
}

// The sign-in flow's limits.
const (
	flowCookie = "agora_oidc_flow"
	// flowTTL is how long a started sign-in may take at the provider.
	flowTTL = 10 * time.Minute
	// maxFlows bounds the sign-ins pending at once; starting one more drops the oldest of
	// the source (an address, an IPv6 /64: sourceOf) with the most pending, so no one source
	// can push the others' sign-ins out by starting flows it never finishes,
	// and browsers behind one proxy (one source) still have the whole table.
	maxFlows = 1024
)

// flow is one sign-in in progress, keyed by the SHA-256 of its state.
type flow struct {
	req  oidcauth.AuthRequest
	next string
	// bind is the SHA-256 of the flow cookie the browser that started it holds: a callback
	// arriving in another browser (a code planted by an attacker, login CSRF) is refused.
	bind    [sha256.Size]byte
	expires time.Time
	// src is the source that started it (sourceOf): a full table drops a flow of the source
	// with the most.
	src netip.Prefix
}

// flows are the pending sign-ins. They live in memory: a restarted serve makes every pending
// sign-in start again.
type flows struct {
	mu    sync.Mutex
	m     map[[sha256.Size]byte]*flow
	order [][sha256.Size]byte // oldest first
	// bySrc counts each source's pending flows.
	bySrc map[netip.Prefix]int
}

// dropLocked removes the pending flow k, if any. f.mu is held.
func (f *flows) dropLocked(k [sha256.Size]byte) {
	x, ok := f.m[k]
	if !ok {
		return
	}
	delete(f.m, k)
	if n := f.bySrc[x.src] - 1; n > 0 {
		f.bySrc[x.src] = n
	} else {
		delete(f.bySrc, x.src)
	}
}

func (f *flows) add(fl *flow, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[[sha256.Size]byte]*flow{}
		f.bySrc = map[netip.Prefix]int{}
	}
	// Flows expire in the order they were added (each lives flowTTL), so the expired ones are
	// at the front; taken ones are gone from m already and are dropped when they reach the
	// front, or when they outnumber the pending.
	for len(f.order) > 0 {
		x, ok := f.m[f.order[0]]
		if ok && now.Before(x.expires) {
			break
		}
		f.dropLocked(f.order[0])
		f.order = f.order[1:]
	}
	// Full: the oldest flow of the source holding the most goes, never the globally oldest
	// (one client starting maxFlows sign-ins cancelled every sign-in under
	// way). Only a full table pays for the scans.
	if len(f.m) >= maxFlows {
		most := 0
		for _, n := range f.bySrc {
			most = max(most, n)
		}
		for _, k := range f.order {
			if x, ok := f.m[k]; ok && f.bySrc[x.src] == most {
				f.dropLocked(k)
				break
			}
		}
	}
	if len(f.order) > 2*len(f.m)+64 {
		live := make([][sha256.Size]byte, 0, len(f.m)+1)
		for _, k := range f.order {
			if _, ok := f.m[k]; ok {
				live = append(live, k)
			}
		}
		f.order = live
	}
	k := sha256.Sum256([]byte(fl.req.State))
	f.dropLocked(k)
	f.m[k] = fl
	f.bySrc[fl.src]++
	f.order = append(f.order, k)
}

// take removes and returns the flow of state: a state is good for one callback, whatever
// that callback's fate.
func (f *flows) take(state string, now time.Time) (*flow, bool) {
	if state == "" {
		return nil, false
	}
	k := sha256.Sum256([]byte(state))
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[k]
	f.dropLocked(k)
	if !ok || !now.Before(fl.expires) {
		return nil, false
	}
	return fl, true
}

// secureCookie says whether the sign-in's cookies are Secure: on a TLS connection, or when
// the registered callback is https (TLS ends at a proxy in front).
func (s *Server) secureCookie(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.cfg.OIDC.Verifier.Config().Web.RedirectURL, "https://")
}

// oidcStart begins a sign-in: fresh state, nonce and PKCE verifier, kept server-side against a
// cookie of this browser, and the browser sent to the provider.
func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	req := oidcauth.AuthRequest{State: randomToken(), Nonce: randomToken(), Verifier: randomToken()}
	to, err := s.cfg.OIDC.Verifier.AuthCodeURL(r.Context(), req)
	if err != nil {
		s.log.Warn("web sign-in not started", "remote", r.RemoteAddr, "err", err)
		s.loginRefused(w, http.StatusServiceUnavailable, "The identity provider cannot be reached: try again shortly, or log in with a token.", next)
		return
	}
	bind := randomToken()
	s.flows.add(&flow{req: req, next: next, bind: sha256.Sum256([]byte(bind)), expires: s.now().Add(flowTTL), src: sourceOf(r.RemoteAddr)}, s.now())
	// Lax, not Strict: the callback is a navigation from the provider's site, which a Strict
	// cookie would not come back with.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: bind, Path: oidcauth.WebCallbackPath, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secureCookie(r), MaxAge: int(flowTTL.Seconds())})
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusSeeOther)
}

// oidcCallback ends a sign-in: the state must be a pending flow's, started in this browser;
// the code is exchanged with the flow's PKCE verifier; the ID token must carry the flow's
// nonce; the rules must give the account a web role. Then a session of the account starts,
// ending no later than its ID token.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fl, ok := s.flows.take(q.Get("state"), s.now())
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: oidcauth.WebCallbackPath, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secureCookie(r), MaxAge: -1})
	if !ok {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr, "reason", "unknown, used or expired state")
		s.loginRefused(w, http.StatusBadRequest, "This sign-in is unknown, already used or expired: sign in again.", "")
		return
	}
	c, err := r.Cookie(flowCookie)
	if err != nil || subtle.ConstantTimeCompare(sha(c.Value), fl.bind[:]) != 1 {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr, "reason", "the callback reached another browser than the one that started the sign-in")
		s.loginRefused(w, http.StatusBadRequest, "This sign-in was started in another browser: sign in again here.", "")
		return
	}
	if e := q.Get("error"); e != "" {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr, "reason", "the provider answered an error", "error", clipText(e))
		s.loginRefused(w, http.StatusForbidden, "The identity provider did not sign you in ("+clipText(e)+").", fl.next)
		return
	}
	id, err := s.cfg.OIDC.Verifier.Exchange(r.Context(), fl.req, q.Get("code"), s.cfg.OIDC.Secret)
	if err != nil {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr, "err", err)
		if errors.Is(err, oidcauth.ErrProvider) {
			s.loginRefused(w, http.StatusServiceUnavailable, "The identity provider cannot be reached or answered badly: try again shortly.", fl.next)
			return
		}
		s.loginRefused(w, http.StatusUnauthorized, "The sign-in could not be verified: "+err.Error(), fl.next)
		return
	}
	if id.Grant.Web == "" {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr, "actor", id.Actor(), "reason", "no auth.oidc rule gives a web role")
		s.loginRefused(w, http.StatusForbidden, "You signed in as "+id.Subject+" at "+id.Issuer+
			", but no rule of this agora (auth.oidc.rules) gives that account a web role. Ask its administrator to add one.", "")
		return
	}
	p := principal{name: id.Actor(), operator: id.Grant.Web == "operator"}
	now := s.now()
	expires := now.Add(sessionTTL)
	if id.Expiry.Before(expires) {
		expires = id.Expiry
	}
	sid := s.auth.startSession(p, id.Actor(), expires)
	// Strict like a token's session: the page below moves on by a navigation of this origin's
	// own, which a Strict cookie goes with (a redirect would stay in the provider's cross-site
	// chain, and neither the cookie nor the Origin check would let it through).
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.secureCookie(r), MaxAge: max(1, int(expires.Sub(now).Seconds()))})
	s.log.Info("web sign-in", "actor", p.actor(), "operator", p.operator, "until", expires.UTC().Format(time.RFC3339), "remote", r.RemoteAddr)
	next := cmp.Or(fl.next, "/runs")
	// next passed localPath when the flow began: a plain ASCII path of this server.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	n := html.EscapeString(next)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s">`+
		`<title>Signed in - agora</title><link rel="stylesheet" href="/static/app.css"></head><body><main><p>Signed in. <a id="continue" href="%s">Continue</a></p></main></body></html>`, n, n)
}

// callbackNavigation reports whether r is the provider sending a browser back: a GET
// navigation to the callback, which comes from the provider's site, so the Origin check
// (which refuses anything cross-site) lets it through; the state, single use and bound to the
// browser that started the flow, is what guards it.
func (s *Server) callbackNavigation(r *http.Request) bool {
	if s.cfg.OIDC == nil || r.Method != http.MethodGet || r.URL.Path != oidcauth.WebCallbackPath || len(r.Header.Values("Origin")) > 0 {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Mode") {
	case "", "navigate":
		return true
	}
	return false
}

// loginRefused answers code with the login page saying msg.
func (s *Server) loginRefused(w http.ResponseWriter, code int, msg, next string) {
	w.WriteHeader(code)
	s.pages.render(w, "login", s.loginData(msg, next))
}

// loginData is the login page's data: the error, the page to return to, and whether the
// provider's sign-in is offered.
func (s *Server) loginData(msg, next string) pageData {
	return pageData{Title: "Log in", Error: msg, Next: next, SignIn: s.cfg.OIDC != nil}
}

func sha(v string) []byte {
	h := sha256.Sum256([]byte(v))
	return h[:]
}

// clipText bounds a provider's word repeated on a page or in a log.
func clipText(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
