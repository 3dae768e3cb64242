package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
)

// target is where a client asked to go: a lowercase host name or an IP literal (no
// brackets), and a port.
type target struct {
	host string
	port uint16
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(int(t.port))) }

// parseAuthority reads "host:port" (a CONNECT's request target, or a URL's host); defPort
// applies when the port is missing and is not 0.
func parseAuthority(s string, defPort uint16) (target, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		if defPort == 0 {
			return target{}, fmt.Errorf("want host:port")
		}
		host, portText = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), strconv.Itoa(int(defPort))
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return target{}, fmt.Errorf("port %q is not a number from 1 to 65535", cut(portText, 16))
	}
	if host == "" {
		return target{}, fmt.Errorf("empty host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	return target{host: strings.ToLower(host), port: uint16(port)}, nil
}

// decision is what the proxy does with a connection to a target.
type decision struct {
	allowed   bool
	intercept bool      // read its requests: a rule restricts them, or a secret names the host
	inspect   bool      // a rule restricts its requests
	bound     []Binding // secrets swapped in on this connection: bound to its host and port, and TLS
	named     []Binding // secrets whose bindings name the host, on any port: masked in responses
	reason    string    // why not, for the refusal
	// learn: the grant refuses the host and a learn dispatch lets it through (its host is in
	// LearnHosts); reason then says why the grant would refuse it.
	learn bool
}

// decide applies the grant to a connection to t; a CONNECT (tunnel) needs the CA where the
// proxy must read requests, plain HTTP does not.
//
// A secret is swapped in only on a tunnel (the proxy terminates its TLS and re-encrypts to
// the host) to a port its binding names; never over plain HTTP, where it would cross the
// network in cleartext. A tunnel to any port of a host a binding names is read all the same,
// so a placeholder sent to the wrong port is refused, not passed on unseen.
func (p *Proxy) decide(t target, tunnel bool) decision {
	g := grant.DecideHost(p.cfg.Rules, t.host, t.port)
	learn := false
	if !g.Allowed {
		const why = "not in the dispatch's egress grant"
		if !p.learnHost(t) {
			return decision{reason: why}
		}
		// Read its requests when the proxy can, so each is recorded with method and path.
		g, learn = grant.EgressDecision{Allowed: true, Inspect: p.cfg.CA != nil || !tunnel}, true
	}
	d := decision{allowed: true, inspect: g.Inspect, learn: learn}
	if learn {
		d.reason = "not in the dispatch's egress grant"
	}
	for i, b := range p.cfg.Bindings {
		named, onPort := false, false
		for _, h := range p.hosts[i] {
			if (grant.EgressRule{Host: h.Host}).MatchesHost(t.host, 1) {
				named = true
				onPort = onPort || h.Port == t.port
			}
		}
		if named {
			d.named = append(d.named, b)
		}
		if named && onPort && tunnel {
			d.bound = append(d.bound, b)
		}
	}
	d.intercept = g.Inspect || len(d.named) > 0
	if d.intercept && tunnel && p.cfg.CA == nil {
		return decision{reason: "its rules or bound secrets need TLS termination, and this dispatch has no proxy CA"}
	}
	return d
}

// learnHost reports whether a learn dispatch may reach t beyond its grant.
func (p *Proxy) learnHost(t target) bool {
	return p.cfg.Learn && grant.DecideHost(p.cfg.LearnHosts, t.host, t.port).Allowed
}

// wouldDeny records what the grant would refuse and learn lets through, before its effect.
// method and path are "" for a connection.
func (p *Proxy) wouldDeny(t target, via, method, path, reason string) error {
	d := map[string]any{entry.KeyHost: t.host, entry.KeyPort: int(t.port), entry.KeyReason: reason, entry.KeyVia: via}
	if method != "" {
		d[entry.KeyMethod], d[entry.KeyPath] = cut(method, 16), cut(path, 200)
	}
	return p.record(p.ctx, entry.NetWouldDeny, d)
}

// boundWhere says where binding i sends its secret, for a refusal: "a.example:443, b.example:8443".
func (p *Proxy) boundWhere(i int) string {
	var b strings.Builder
	for j, h := range p.hosts[i] {
		if j > 0 {
			b.WriteString(", ")
		}
		if j == 4 {
			b.WriteString("...")
			break
		}
		b.WriteString(cut(target{host: h.Host, port: h.Port}.String(), 270))
	}
	return b.String()
}

// dial connects to t through the egress dialer. A refusal by the egress policy (a private
// address, say) comes back as a reason; any other failure as err.
func (p *Proxy) dial(ctx context.Context, t target) (c net.Conn, refused string, err error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err = p.cfg.Dialer.DialContext(ctx, "tcp", t.String())
	var de *egress.DeniedError
	if errors.As(err, &de) {
		reason := de.Reason
		if de.Addr.IsValid() {
			reason = "it resolves to " + de.Addr.String() + ", " + de.Reason
		}
		return nil, reason, nil
	}
	if err != nil {
		return nil, "", err
	}
	c, err = p.trackUpstream(c)
	return c, "", err
}

const dialTimeout = 15 * time.Second

// refusalSentence is the one sentence a refused client (a model, often) reads.
func refusalSentence(t target, reason string) string {
	return fmt.Sprintf("agora refused the connection to %s: %s; this sandbox can reach only the hosts its grant allows.", cut(t.String(), 270), reason)
}

func cut(s string, n int) string {
	s = s[:min(len(s), n)]
	return strings.ToValidUTF8(s, "?")
}
