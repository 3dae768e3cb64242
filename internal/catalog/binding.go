package catalog

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// Binding says where one secret of an env bundle may be sent. A bound secret never enters the
// sandbox: the sandbox's variable holds a placeholder, and the host-side egress proxy puts the
// value in its place only in requests to Hosts, in the Authorization header (bearer, basic
// userinfo) and the headers named in Headers, and only inside TLS the proxy terminates and
// re-encrypts to the host (never over plain HTTP). A placeholder headed anywhere else is
// refused.
//
// Stored form (in [EnvDoc] and [Meta]): hosts in the form [grant.BoundHostString] writes,
// hosts and headers sorted and unique, header names in canonical MIME form
// ([NormalizeBinding] makes it; [CheckBindings] checks it).
type Binding struct {
	// Hosts are where the secret may go over HTTPS: a lowercase host name, "*.domain" for the
	// strict subdomains of domain (as in a grant's egress), or a canonical IP address, with
	// ":port" when the port is not 443 (IPv6 as "[2001:db8::1]:8443"; on 443 without
	// brackets). A host without a port means port 443 only: bindings stored before hosts had
	// ports read that way too. Never a scheme or path. At least one.
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

// CheckBindingHost reports whether h may be a binding's host: HOST or HOST:PORT, where HOST
// follows the rules of a grant's egress entries ([grant.ValidEgress]) or is a canonical IP
// address ([grant.ParseBoundHost]). A name whose last label starts with a digit would read as
// an IP address to a URL parser (127.1), so it must be a canonical one.
func CheckBindingHost(h string) error {
	const want = "want a lowercase host name such as api.example.com, *.example.com for its subdomains, or an IP address such as 192.0.2.1, with :PORT when the port is not 443 (HTTPS); no scheme or path"
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/@ ") {
		return fmt.Errorf("host %q: %s", h, want)
	}
	if _, err := grant.ParseBoundHost(h); err != nil {
		// The grant's parser names the entry "egress"; a binding's problem names its host.
		msg := err.Error()
		if strings.Contains(msg, "write it as") || strings.Contains(msg, "brackets") || strings.Contains(msg, "port ") {
			if _, detail, ok := strings.Cut(msg, fmt.Sprintf("%q: ", h)); ok {
				msg = detail
			}
			return fmt.Errorf("host %q: %s", h, msg)
		}
		name := h
		if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[:i], ":") {
			name = h[:i]
		}
		if last := name[strings.LastIndexByte(name, '.')+1:]; last != "" && last[0] >= '0' && last[0] <= '9' && grant.ValidEgress(name) {
			return fmt.Errorf("host %q: reads as an IP address but is not one in canonical form; %s", h, want)
		}
		return fmt.Errorf("host %q: %s", h, want)
	}
	return nil
}

// canonicalBindingHost is h in stored form, or h unchanged when it is no valid host (so
// [CheckBindingHost] names it as written).
func canonicalBindingHost(h string) string {
	r, err := grant.ParseBoundHost(h)
	if err != nil {
		return h
	}
	return grant.BoundHostString(r)
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

// NormalizeBinding returns b in stored form: hosts and headers sorted and unique, hosts without
// ":443" (the default port), header names in canonical MIME form ([CanonicalHeader]). Hosts
// keep their case, so an error names a host as it was written.
func NormalizeBinding(b Binding) Binding {
	headers := make([]string, len(b.Headers))
	for i, h := range b.Headers {
		headers[i] = CanonicalHeader(h)
	}
	hosts := make([]string, len(b.Hosts))
	for i, h := range b.Hosts {
		hosts[i] = canonicalBindingHost(h)
	}
	return Binding{Hosts: sortedUnique(hosts), Headers: sortedUnique(headers)}
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
			} else if c := canonicalBindingHost(h); c != h {
				problems = append(problems, fmt.Sprintf("binding %s: host %q: write it as %s", k, h, c))
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
