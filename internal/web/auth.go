package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// Sessions and login.
const (
	cookieName = "agora_session"
	sessionTTL = 12 * time.Hour
	// maxClientSessions bounds each client's sessions: logging in once more ends that
	// client's oldest session, so no token (a read-only one included) can fill the table and
	// keep another client out. The table holds at most this many per configured client.
	maxClientSessions = 32
	// maxSessions is when every expired session is swept: a provider's operators are many
	// owners, each bounded by maxClientSessions only.
	maxSessions = 4096
)

// principal is who a request acts for.
type principal struct {
	name     string
	operator bool
	// csrf is the session's CSRF token; empty for a bearer request (nothing ambient to forge).
	csrf string
}

type session struct {
	p       principal
	owner   string // whose sessions it counts against: "token:INDEX" or "oidc:ISSUER#sub"
	expires time.Time
}

// authenticator checks tokens and keeps sessions. Sessions live in memory only: a restarted
// serve logs everyone out, and no session id is ever written down.
type authenticator struct {
	clients []tokenSum
	now     func() time.Time
	limit   *loginLimiter

	mu sync.Mutex
	// sessions maps the SHA-256 of a session id to its session, and byClient lists each
	// client's session keys oldest first; both guarded by mu.
	sessions map[[sha256.Size]byte]*session
	byClient map[string][][sha256.Size]byte
}

// tokenSum is a client's token hashed, so every comparison takes the same time whatever the
// presented token's length.
type tokenSum struct {
	client mcpserver.Client
	sum    [sha256.Size]byte
}

func newAuthenticator(clients []mcpserver.Client, now func() time.Time) *authenticator {
	a := &authenticator{now: now, limit: newLoginLimiter(), sessions: map[[sha256.Size]byte]*session{}, byClient: map[string][][sha256.Size]byte{}}
	a.limit.now = now // one clock for sessions and the limiter: the server's (Config.Now)
	for _, c := range clients {
		a.clients = append(a.clients, tokenSum{client: c, sum: sha256.Sum256([]byte(c.Token))})
	}
	return a
}

// verify finds the client whose token was presented, comparing against every client in
// constant time.
func (a *authenticator) verify(token string) (principal, bool) {
	p, _, ok := a.verifyClient(token)
	return p, ok
}

// verifyClient is verify, with the index of the client.
func (a *authenticator) verifyClient(token string) (principal, int, bool) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i, c := range a.clients {
		if subtle.ConstantTimeCompare(sum[:], c.sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 || token == "" {
		return principal{}, -1, false
	}
	c := a.clients[match].client
	return principal{name: c.Name, operator: c.Ceiling.Allows(mcpserver.CeilingOrchestrate)}, match, true
}

// newSession starts a session for p, the principal of client, and returns its id (for the
// cookie).
func (a *authenticator) newSession(p principal, client int) string {
	return a.startSession(p, "token:"+strconv.Itoa(client), a.now().Add(sessionTTL))
}

// startSession starts a session for p counted against owner, ending at expires, and returns
// its id. The owner's expired sessions are dropped, and its oldest when it holds
// maxClientSessions. A provider's operator is its own owner (its issuer and subject), so the
// bound is per person there too.
func (a *authenticator) startSession(p principal, owner string, expires time.Time) string {
	id, csrf := randomToken(), randomToken()
	p.csrf = csrf
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := a.byClient[owner][:0]
	for _, k := range a.byClient[owner] {
		if s, ok := a.sessions[k]; ok && !now.After(s.expires) {
			keys = append(keys, k)
		} else {
			delete(a.sessions, k)
		}
	}
	for len(keys) >= maxClientSessions {
		delete(a.sessions, keys[0])
		keys = keys[1:]
	}
	key := sha256.Sum256([]byte(id))
	a.sessions[key] = &session{p: p, owner: owner, expires: expires}
	a.byClient[owner] = append(keys, key)
	if len(a.sessions) > maxSessions {
		a.sweepLocked(now)
	}
	return id
}

// sweepLocked drops every expired session and every owner left with none (a provider's
// subjects are many, and each leaves its list behind). a.mu is held.
func (a *authenticator) sweepLocked(now time.Time) {
	for owner, keys := range a.byClient {
		live := keys[:0]
		for _, k := range keys {
			if s, ok := a.sessions[k]; ok && !now.After(s.expires) {
				live = append(live, k)
			} else {
				delete(a.sessions, k)
			}
		}
		if len(live) == 0 {
			delete(a.byClient, owner)
		} else {
			a.byClient[owner] = live
		}
	}
}

func (a *authenticator) session(id string) (principal, bool) {
	key := sha256.Sum256([]byte(id))
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[key]
	if !ok {
		return principal{}, false
	}
	if a.now().After(s.expires) {
		delete(a.sessions, key)
		return principal{}, false
	}
	return s.p, true
}

func (a *authenticator) endSession(id string) {
	a.mu.Lock()
	delete(a.sessions, sha256.Sum256([]byte(id)))
	a.mu.Unlock()
}

// who reads the request's credential: a bearer token (programs) or the session cookie
// (browsers).
func (a *authenticator) who(r *http.Request) (principal, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return principal{}, false
		}
		return a.verify(tok)
	}
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return principal{}, false
	}
	return a.session(c.Value)
}

// csrfOK reports whether a changing request carries its session's CSRF token (a form field
// or the X-CSRF-Token header). A bearer request has no session and needs none.
func csrfOK(p principal, r *http.Request) bool {
	if p.csrf == "" {
		return true
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(p.csrf)) == 1
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// actor is how an action of p is recorded: "web:" and the token's name, as MCP's are "mcp:".
func (p principal) actor() string { return "web:" + p.name }

// failed charges a wrong token to the request's source and reports whether the source is
// still within its budget of wrong tokens.
func (a *authenticator) failed(r *http.Request) bool {
	src := sourceOf(r.RemoteAddr)
	return a.limit.failed(src.Addr())
}
