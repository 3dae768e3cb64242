package catalog

import (
	"fmt"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// Binding says where one secret of an env bundle may be sent. A bound secret never enters the
// sandbox: the sandbox's variable holds a placeholder, and the host-side egress proxy puts the
// value in its place only in requests to Hosts, in the Authorization header (bearer, basic
// userinfo) and the headers named in Headers. A placeholder headed anywhere else is refused.
//
// Stored form (in [EnvDoc] and [Meta]): hosts and headers sorted and unique, header names in
// canonical MIME form ([NormalizeBinding] makes it; [CheckBindings] checks it).
type Binding struct {
	// Hosts are lowercase host names, "*.domain" for the strict subdomains of domain (as in
	// a grant's egress), or canonical IP addresses (IPv6 without brackets); never a port,
	// scheme or path. At least one.
	Hosts []string `json:"hosts"`
	// Headers are request headers swapped besides Authorization (X-Api-Key, say).
	Headers []string `json:"headers"`
}

// Limits on one binding: far above real use, small enough that a bound bundle stays a
// readable document.
const (
	MaxBindingHosts   = 64
	MaxBindingHeaders = 32
	maxHeaderName     = 128
)

// CheckBindingHost reports whether h may be a binding's host: the rules of a grant's egress
// entries ([grant.ValidEgress]) or a canonical IP address. A name whose last label starts with
// a digit would read as an IP address to a URL parser (127.1), so it must be a canonical one.
func CheckBindingHost(h string) error {
	const want = "want a lowercase host name such as api.example.com, *.example.com for its subdomains, or an IP address such as 192.0.2.1; no scheme, port or path"
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" || a.String() != h {
			return fmt.Errorf("host %q: an IP address must be written in canonical form (%s)", h, a.WithZone(""))
		}
		return nil
	}
	if !grant.ValidEgress(h) {
		return fmt.Errorf("host %q: %s", h, want)
	}
	if last := h[strings.LastIndexByte(h, '.')+1:]; last[0] >= '0' && last[0] <= '9' {
		return fmt.Errorf("host %q: reads as an IP address but is not one in canonical form; %s", h, want)
	}
	return nil
}

// unswappable are the header names a binding may not name: the connection and framing
// headers (a value in them would be read by the proxy or a hop, not the service, or change how
// the request is delimited) and Authorization, which is always swapped.
var unswappable = map[string]string{
	"Authorization":     "Authorization is always swapped for a bound secret; leave it out",
	"Host":              "Host names the server",
	"Content-Length":    "Content-Length frames the request",
	"Transfer-Encoding": "Transfer-Encoding frames the request",
	"Connection":        "Connection is a hop-by-hop header",
	"Keep-Alive":        "Keep-Alive is a hop-by-hop header",
	"Te":                "Te is a hop-by-hop header",
	"Trailer":           "Trailer is a hop-by-hop header",
	"Upgrade":           "Upgrade is a hop-by-hop header",
	"Http2-Settings":    "Http2-Settings is a hop-by-hop header",
}

// CheckBindingHeader reports whether h may be a binding's extra header: a valid header name in
// canonical MIME form (X-Api-Key), not a hop-by-hop, proxy or framing header.
func CheckBindingHeader(h string) error {
	if h == "" || len(h) > maxHeaderName || strings.IndexFunc(h, notTokenRune) >= 0 {
		return fmt.Errorf("header %q: want a header name such as X-Api-Key (letters, digits and -, at most %d characters)", h, maxHeaderName)
	}
	c := textproto.CanonicalMIMEHeaderKey(h)
	if why, ok := unswappable[c]; ok {
		return fmt.Errorf("header %q cannot be bound: %s", h, why)
	}
	if strings.HasPrefix(c, "Proxy-") {
		return fmt.Errorf("header %q cannot be bound: Proxy- headers are for the proxy, not the service", h)
	}
	if c != h {
		return fmt.Errorf("header %q: write it in canonical form, %s", h, c)
	}
	return nil
}

// notTokenRune reports whether r is outside an HTTP token (RFC 9110, section 5.6.2).
func notTokenRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// CanonicalHeader returns the canonical MIME form of header name h (x-api-key is X-Api-Key),
// or h unchanged when it is no header name, so [CheckBindingHeader] names it as written.
func CanonicalHeader(h string) string {
	if h == "" || strings.IndexFunc(h, notTokenRune) >= 0 {
		return h
	}
	return textproto.CanonicalMIMEHeaderKey(h)
}

// NormalizeBinding returns b in stored form: hosts and headers sorted and unique, header names
// in canonical MIME form ([CanonicalHeader]). Hosts keep their case, so an error names a host
// as it was written.
func NormalizeBinding(b Binding) Binding {
	headers := make([]string, len(b.Headers))
	for i, h := range b.Headers {
		headers[i] = CanonicalHeader(h)
	}
	return Binding{Hosts: sortedUnique(b.Hosts), Headers: sortedUnique(headers)}
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// CheckBindings returns every problem of an env bundle's bindings, key by key in order: only a
// secret of the bundle may be bound (a plain value never left the bundle's document, so
// binding it protects nothing), to at least one valid host, with valid headers, all in stored
// form.
func CheckBindings[V, S any](bindings map[string]Binding, values map[string]V, secrets map[string]S) []string {
	var problems []string
	for _, k := range SortedKeys(bindings) {
		b := bindings[k]
		_, isSecret := secrets[k]
		_, isValue := values[k]
		switch {
		case isValue && !isSecret:
			problems = append(problems, fmt.Sprintf("binding %s: %s is a plain value, not a secret; only a secret can be bound to hosts", k, k))
			continue
		case !isSecret:
			problems = append(problems, fmt.Sprintf("binding %s: the bundle has no secret %s (its secrets: %s)", k, k, orNone(SortedKeys(secrets))))
			continue
		}
		if len(b.Hosts) == 0 {
			problems = append(problems, fmt.Sprintf("binding %s: no hosts; bind a secret to at least one host", k))
		}
		if len(b.Hosts) > MaxBindingHosts {
			problems = append(problems, fmt.Sprintf("binding %s: more than %d hosts", k, MaxBindingHosts))
		}
		if len(b.Headers) > MaxBindingHeaders {
			problems = append(problems, fmt.Sprintf("binding %s: more than %d headers", k, MaxBindingHeaders))
		}
		for _, h := range b.Hosts {
			if err := CheckBindingHost(h); err != nil {
				problems = append(problems, fmt.Sprintf("binding %s: %v", k, err))
			}
		}
		for _, h := range b.Headers {
			if err := CheckBindingHeader(h); err != nil {
				problems = append(problems, fmt.Sprintf("binding %s: %v", k, err))
			}
		}
		if !isSortedUnique(b.Hosts) || !isSortedUnique(b.Headers) {
			problems = append(problems, fmt.Sprintf("binding %s: hosts and headers must be sorted and unique", k))
		}
	}
	return problems
}

func isSortedUnique(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}
