package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// Operators from an OpenID Connect provider, per the MCP authorization specification:
// the protected resource metadata document (RFC 9728) names the provider, a request without a
// valid token is answered 401 with WWW-Authenticate naming that document, and a valid token
// whose claims earn no ceiling 403 (insufficient_scope). A static token is tried first; both
// may be configured at once.

// prmPath is where the protected resource metadata is served (RFC 9728 §3), and prmPath+httpPath
// its path-suffixed form for the /mcp resource.
const prmPath = "/.well-known/oauth-protected-resource"

// principalKey is where verify leaves the principal of an OIDC token in TokenInfo.Extra.
const principalKey = "agora.principal"

// maxOIDCPrincipals bounds the per-subject limiters kept; past it they start afresh.
const maxOIDCPrincipals = 4096

// resourceURL is the MCP endpoint's public URL: the configured one, else the bound address's.
func resourceURL(cfg HTTPConfig, addr net.Addr) string {
	if cfg.Resource != "" {
		return strings.TrimSuffix(cfg.Resource, "/")
	}
	return "http://" + addr.String() + httpPath
}

// metadataURL is the URL of the protected resource metadata of resource (RFC 9728 §3.1: the
// well-known path inserted between host and the resource's path).
func metadataURL(resource string) string {
	scheme, rest, _ := strings.Cut(resource, "://")
	host, path, _ := strings.Cut(rest, "/")
	if path != "" {
		path = "/" + path
	}
	return scheme + "://" + host + prmPath + path
}

func (g *httpGuard) metadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               g.resource,
		AuthorizationServers:   []string{g.oidc.Config().Issuer},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "agora MCP",
	})
}

// challenge401 is the WWW-Authenticate value of a 401.
func (g *httpGuard) challenge401() string {
	if g.oidc == nil {
		return challenge
	}
	return fmt.Sprintf(`%s, resource_metadata=%q`, challenge, metadataURL(g.resource))
}

// verifyOIDC verifies a provider's token. A provider that cannot be reached is answered as an
// invalid token (401), whose message says to retry; the operator's log says why.
func (g *httpGuard) verifyOIDC(ctx context.Context, token string) (*auth.TokenInfo, error) {
	id, err := g.oidc.Verify(ctx, token)
	switch {
	case errors.Is(err, oidcauth.ErrProvider):
		g.log.Warn("oidc provider unavailable", "err", err.Error())
		return nil, fmt.Errorf("%w: the identity provider could not be reached; retry", auth.ErrInvalidToken)
	case err != nil:
		g.log.Warn("oidc token refused", "reason", err.Error())
		return nil, auth.ErrInvalidToken
	}
	p := Principal{Client: id.Actor()}
	if id.Grant.Ceiling != "" {
		c, err := ParseCeiling(id.Grant.Ceiling)
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		p.Ceiling = c
	}
	return &auth.TokenInfo{UserID: p.Client, Expiration: id.Expiry, Extra: map[string]any{principalKey: p}}, nil
}

// principalOf returns the principal an OIDC token was verified as.
func principalOf(ti *auth.TokenInfo) (Principal, bool) {
	if ti == nil || ti.Extra == nil {
		return Principal{}, false
	}
	p, ok := ti.Extra[principalKey].(Principal)
	return p, ok
}

// insufficient refuses a valid token whose claims matched no rule granting a ceiling.
func (g *httpGuard) insufficient(w http.ResponseWriter, r *http.Request, who string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", error_description="no agora.yaml auth.oidc rule grants this subject a ceiling", resource_metadata=%q`, metadataURL(g.resource)))
	g.refuse(w, r, http.StatusForbidden, "forbidden: "+who+" is signed in, but no auth.oidc rule grants it a ceiling")
}

// dynLimits are the rate limiters and in-flight caps of OIDC principals, made on first use.
type dynLimits struct {
	l        Limits
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	inflight map[string]chan struct{}
}

func (d *dynLimits) get(name string) (*rate.Limiter, chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if lim, ok := d.limiters[name]; ok {
		return lim, d.inflight[name]
	}
	if d.limiters == nil || len(d.limiters) >= maxOIDCPrincipals {
		d.limiters, d.inflight = map[string]*rate.Limiter{}, map[string]chan struct{}{}
	}
	lim, sem := rate.NewLimiter(rate.Limit(d.l.Rate), d.l.Burst), make(chan struct{}, d.l.MaxInFlight)
	d.limiters[name], d.inflight[name] = lim, sem
	return lim, sem
}
