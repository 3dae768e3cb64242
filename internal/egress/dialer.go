package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Resolver looks up the addresses of a host name; [*net.Resolver] satisfies it. network is
// "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

const (
	// dialTimeout bounds one TCP connect to one vetted address.
	dialTimeout = 10 * time.Second
	// keepAlive is the TCP keep-alive period of every connection.
	keepAlive = 30 * time.Second
)

// Dialer dials TCP connections only to destinations its [Policy] allows. Build it with
// [NewDialer]; it is safe for concurrent use.
type Dialer struct {
	policy   Policy
	resolver Resolver
	// dial connects to a vetted literal "ip:port". Tests replace it to observe where a dial
	// goes; it is never handed a name.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewDialer returns a Dialer enforcing a copy of p and resolving names with r (nil means
// [net.DefaultResolver]). Callers that take p from configuration SHOULD run [Policy.Validate]
// first; NewDialer does not, and a malformed entry simply never matches.
func NewDialer(p Policy, r Resolver) *Dialer {
	if r == nil {
		r = net.DefaultResolver
	}
	p.AllowPrivate = slices.Clone(p.AllowPrivate)
	if p.Hosts != nil {
		p.Hosts = append(make([]string, 0, len(p.Hosts)), p.Hosts...)
	}
	return &Dialer{policy: p, resolver: r, dial: newNetDialer().DialContext}
}

func newNetDialer() *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
}

// DialContext connects to addr ("host:port") over network ("tcp", "tcp4" or "tcp6"). The host
// is vetted with [Policy.CheckHost]; a name is resolved exactly once, every address returned is
// vetted with [Policy.CheckAddr], and only those literal addresses are dialed, in order, until
// one connects. If any returned address is denied the dial is refused with a [*DeniedError]
// naming the host and that address. Cancelling ctx aborts resolution and the connect.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var lookupNet string
	switch network {
	case "tcp":
		lookupNet = "ip"
	case "tcp4":
		lookupNet = "ip4"
	case "tcp6":
		lookupNet = "ip6"
	default:
		return nil, fmt.Errorf("egress dial: network %q not supported (want tcp, tcp4 or tcp6)", network)
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress dial: %w", err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress dial %q: port %q is not a number from 0 to 65535", host, portText)
	}
	name, vetted, err := d.vet(ctx, lookupNet, host)
	if err != nil {
		return nil, err
	}
	return d.dialVetted(ctx, network, name, vetted, uint16(port))
}

// Vet resolves host as [Dialer.DialContext] would and checks it and every address it resolves
// to against the policy, without connecting: nil when a dial to host would be let through
// now (a dial resolves again, so a name that changes its answer in between is judged again
// there). A refusal is a [*DeniedError].
func (d *Dialer) Vet(ctx context.Context, host string) error {
	_, _, err := d.vet(ctx, "ip", host)
	return err
}

// vet is host's vetted addresses, resolved once over lookupNet, and the name to dial them
// under (host itself for an IP literal).
func (d *Dialer) vet(ctx context.Context, lookupNet, host string) (string, []netip.Addr, error) {
	name, ip, err := d.policy.vetHost(host)
	if err != nil {
		return "", nil, err
	}
	if ip.IsValid() {
		return host, []netip.Addr{ip}, nil
	}
	ips, err := d.resolver.LookupNetIP(ctx, lookupNet, name)
	if err != nil {
		return "", nil, fmt.Errorf("egress resolve %q: %w", name, err)
	}
	if len(ips) == 0 {
		return "", nil, fmt.Errorf("egress resolve %q: no addresses", name)
	}
	vetted := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if ip.Zone() == "" {
			ip = ip.Unmap() // net.Resolver returns IPv4 answers in IPv4-mapped form
		}
		if err := d.policy.CheckAddr(ip); err != nil {
			err.(*DeniedError).Host = name
			return "", nil, err
		}
		vetted = append(vetted, ip)
	}
	return name, vetted, nil
}

// dialVetted tries each vetted address in order and returns the first connection.
func (d *Dialer) dialVetted(ctx context.Context, network, host string, ips []netip.Addr, port uint16) (net.Conn, error) {
	var errs []error
	for _, ip := range ips {
		conn, err := d.dial(ctx, network, netip.AddrPortFrom(ip, port).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress dial %q: %w", host, errors.Join(errs...))
}
