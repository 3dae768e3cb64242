package modelgw

import (
	"cmp"
	"context"
	"errors"
	"net/url"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// Learn for the gateway's fetch (docs/learn.md): in a learn dispatch a /fetch (openai's
// http_fetch, claude's WebFetch through the worker) or a redirect hop to a host the grant
// refuses, but egress.learn_hosts admits (Config.LearnHosts, host and port only, as the egress
// proxy judges them), is recorded as net.would_deny (via "fetch", with its method and path)
// before it is sent, then sent. A host outside learn_hosts, or any other refusal (a scheme,
// userinfo, a private address the dialer refuses), stays refused as in any dispatch, and is
// never recorded as learned.

// learnFetch records u's would_deny and reports true when the grant's refusal err may be
// learned; false leaves err as the answer. A would_deny that cannot be recorded refuses.
func (g *Gateway) learnFetch(ctx context.Context, u *url.URL, host string, port uint16, method string, err error) (bool, error) {
	var rf *refusal
	if !g.learn || len(g.learnHosts) == 0 || !errors.As(err, &rf) || !grant.DecideHost(g.learnHosts, host, port).Allowed {
		return false, err
	}
	// What the dialer refuses (an address outside egress.allow_private, named in the URL or
	// resolved from the name) is never sent, so it is not recorded as learned: a would_deny
	// is evidence `agora capability suggest` proposes from. Only a learn host's name is
	// looked up here, never one the agent chose outside learn_hosts.
	if derr := g.dialer.CheckURL(u); derr != nil {
		return false, derr
	}
	if derr := g.dialer.Vet(ctx, host); derr != nil {
		return false, derr
	}
	path := cmp.Or(u.EscapedPath(), "/")
	d := map[string]any{
		"dispatch": g.dispatchID, entry.KeyRole: g.role,
		entry.KeyHost: host, entry.KeyPort: int(port), entry.KeyVia: "fetch",
		entry.KeyMethod: method, entry.KeyPath: cutString(path, 200),
		entry.KeyReason: g.red.String(rf.msg),
	}
	if rerr := g.audit.Record(context.WithoutCancel(ctx), entry.NetWouldDeny, d); rerr != nil {
		return false, &refusal{msg: "learn: the would_deny was not recorded, so the fetch is refused"}
	}
	return true, nil
}

// cutString is s cut to at most n bytes.
func cutString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
