package grant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Limits of one egress rule, so a rule from a capability file stays small to match.
const (
	maxRuleMethods = 16
	maxRulePaths   = 64
	maxRulePath    = 1024
)

// EgressRule is one entry of a grant's egress: a host pattern, an optional port, and, for
// hosts whose requests the egress proxy reads (plain HTTP, or HTTPS it terminates), the
// methods and path prefixes allowed. A rule with methods or paths makes the proxy terminate
// TLS to that host (fail closed: it cannot enforce what it cannot read).
//
// Written as a string when it has neither methods nor paths: "proxy.golang.org",
// "*.npmjs.org:443", "127.0.0.2:8443", "[2001:db8::1]:443"; otherwise as an object
// {host, port, methods, paths}. The string form is also its JSON form, so grants written
// before rules had ports and paths keep their bytes and digests.
type EgressRule struct {
	// Host is a lowercase host name, "*.example.com" for any subdomain of example.com (not
	// example.com itself), or a canonical IP literal (IPv6 without brackets).
	Host string `yaml:"host" json:"host"`
	// Port, when not 0, is the only port allowed; 0 allows any port of the host.
	Port uint16 `yaml:"port" json:"port,omitempty"`
	// Methods, when set, are the only HTTP methods allowed (upper case).
	Methods []string `yaml:"methods" json:"methods,omitempty"`
	// Paths, when set, are the path prefixes allowed: a request path must be one or lie under
	// one ([PathUnder]: a prefix ends at a segment boundary).
	Paths []string `yaml:"paths" json:"paths,omitempty"`
}

// ParseEgressRule parses the string form "host", "host:port", "[v6]" or "[v6]:port". The host
// is lowercased (names compare case-insensitively); the rule is validated.
func ParseEgressRule(s string) (EgressRule, error) {
	var r EgressRule
	host := s
	if strings.ContainsAny(s, "/@ ") {
		// "https://example.com/x" would otherwise be read as host "https" with a bad port.
		return EgressRule{}, fmt.Errorf("egress %q: write a host and optional port such as api.example.com:443, not a URL (paths go in a rule's paths)", s)
	}
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return EgressRule{}, fmt.Errorf("egress %q: missing ] after an IPv6 address", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return EgressRule{}, fmt.Errorf("egress %q: want [address]:port", s)
			}
			port, err := parsePort(p)
			if err != nil {
				return EgressRule{}, fmt.Errorf("egress %q: %w", s, err)
			}
			r.Port = port
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return EgressRule{}, fmt.Errorf("egress %q: brackets hold only an IPv6 address", s)
		}
		// One spelling per address, so equal rules compare (and narrow) equal.
		host = a.String()
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			if _, err := netip.ParseAddr(s); err == nil {
				return EgressRule{}, fmt.Errorf("egress %q: write an IPv6 address in brackets, [%s]", s, s)
			}
			if _, err := netip.ParseAddr(s[:i]); err == nil {
				return EgressRule{}, fmt.Errorf("egress %q: write an IPv6 address in brackets, [%s]:%s", s, s[:i], s[i+1:])
			}
			return EgressRule{}, fmt.Errorf("egress %q: want host or host:port", s)
		}
		port, err := parsePort(s[i+1:])
		if err != nil {
			return EgressRule{}, fmt.Errorf("egress %q: %w", s, err)
		}
		host, r.Port = s[:i], port
	}
	r.Host = strings.ToLower(host)
	if err := r.Validate(); err != nil {
		return EgressRule{}, err
	}
	return r, nil
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || (len(p) > 1 && p[0] == '0') {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

// Validate reports what is wrong with r: a host that is not a lowercase name, "*.name" or a
// canonical IP literal; a method that is not an upper-case token; a path that does not start
// with "/", holds a dot segment, an empty segment, a percent sign, a control character or
// white space; or too many of either.
func (r EgressRule) Validate() error {
	if a, err := netip.ParseAddr(r.Host); err == nil && a.Zone() == "" && a.String() != r.Host {
		return fmt.Errorf("egress host %q: write the IP address as %s", r.Host, a)
	}
	if !validRuleHost(r.Host) {
		return fmt.Errorf("egress host %q: want a lowercase host name such as api.example.com or *.example.com, or an IP address", r.Host)
	}
	if len(r.Methods) > maxRuleMethods {
		return fmt.Errorf("egress %s: more than %d methods", r.Host, maxRuleMethods)
	}
	for _, m := range r.Methods {
		if !validMethod(m) {
			return fmt.Errorf("egress %s: method %q: want an upper-case HTTP method such as GET", r.Host, m)
		}
	}
	if len(r.Paths) > maxRulePaths {
		return fmt.Errorf("egress %s: more than %d paths", r.Host, maxRulePaths)
	}
	for _, p := range r.Paths {
		if reason := pathPrefixProblem(p); reason != "" {
			return fmt.Errorf("egress %s: path %q: %s", r.Host, p, reason)
		}
	}
	return nil
}

func validRuleHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" && a.String() == h
	}
	if !ValidEgress(h) {
		return false
	}
	// A name whose last label starts with a digit reads as a (non-canonical) IP address.
	last := h[strings.LastIndexByte(h, '.')+1:]
	return last[0] < '0' || last[0] > '9'
}

func validMethod(m string) bool {
	if m == "" || len(m) > 32 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 'A' || m[i] > 'Z' {
			return false
		}
	}
	return true
}

// pathPrefixProblem says why p cannot be a path prefix, or "".
func pathPrefixProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return `want a path starting with "/"`
	case len(p) > maxRulePath:
		return "longer than 1024 bytes"
	case strings.ContainsAny(p, "%?#\\"):
		return `"%", "?", "#" and "\" are not allowed (write the path decoded, without a query)`
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return "control characters, spaces and non-ASCII bytes are not allowed"
		}
	}
	if dotOrEmptySegment(p) {
		return `empty, "." and ".." segments are not allowed`
	}
	return ""
}

// DotOrEmptySegment reports whether path (starting with "/") has a "." or ".." segment (";"
// parameters cut) or an empty one: a path that no path rule admits.
func DotOrEmptySegment(path string) bool {
	return strings.HasPrefix(path, "/") && dotOrEmptySegment(path)
}

// dotOrEmptySegment reports whether the path p (starting with "/") has an empty segment
// ("//"), or a "." or ".." segment. A trailing "/" is not an empty segment.
func dotOrEmptySegment(p string) bool {
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		// A segment's ";parameters" are cut first: servers that strip them read "..;x" as "..".
		if before, _, ok := strings.Cut(s, ";"); ok {
			s = before
		}
		if s == "." || s == ".." || (s == "" && i != len(segs)-1) {
			return true
		}
	}
	return false
}

// Restricted reports whether r limits methods or paths: the proxy must read the requests of a
// connection to its host to enforce it.
func (r EgressRule) Restricted() bool { return len(r.Methods) > 0 || len(r.Paths) > 0 }

// String is the rule's string form when it is not [EgressRule.Restricted], and a readable
// summary otherwise ("api.github.com GET /repos/acme/").
func (r EgressRule) String() string {
	s := r.Host
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(int(r.Port))
	}
	if len(r.Methods) > 0 {
		s += " " + strings.Join(r.Methods, ",")
	}
	if len(r.Paths) > 0 {
		s += " " + strings.Join(r.Paths, " ")
	}
	return s
}

// UnmarshalText reads the string form, so YAML and flags can write "host:port".
func (r *EgressRule) UnmarshalText(b []byte) error {
	v, err := ParseEgressRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalJSON writes the string form for an unrestricted rule and the object otherwise.
func (r EgressRule) MarshalJSON() ([]byte, error) {
	if !r.Restricted() {
		return json.Marshal(r.String())
	}
	type object EgressRule // no methods: the default encoding
	return json.Marshal(object(r))
}

// UnmarshalJSON reads either form; the object form refuses unknown fields. The rule is
// validated.
func (r *EgressRule) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return r.UnmarshalText([]byte(s))
	}
	if err := checkRuleKeys(b); err != nil {
		return fmt.Errorf("egress rule: %w", err)
	}
	type object EgressRule
	var o object
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf("egress rule: %w", err)
	}
	if dec.More() {
		return errors.New("egress rule: trailing data")
	}
	v := EgressRule(o).Clean()
	if err := v.Validate(); err != nil {
		return err
	}
	*r = v
	return nil
}

// Clean returns r as the string form would give it: the host lowercased, and empty method and
// path lists as none (an empty list restricts nothing). A rule decoded field by field (a YAML
// or JSON object) is cleaned before it is validated.
func (r EgressRule) Clean() EgressRule {
	r.Host = strings.ToLower(r.Host)
	if len(r.Methods) == 0 {
		r.Methods = nil
	}
	if len(r.Paths) == 0 {
		r.Paths = nil
	}
	return r
}

// ruleKeys are the object form's keys. encoding/json would also take "Host" or "HOST" for
// host and the last of two "host" keys; a rule must read the same to every reader.
var ruleKeys = []string{"host", "methods", "paths", "port"}

// checkRuleKeys refuses an object b whose keys are not exactly, and at most once, those of
// ruleKeys. Anything that is not an object is left to the decoder to refuse.
func checkRuleKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if !slices.Contains(ruleKeys, k) {
			if len(k) > 40 {
				k = k[:40] + "..."
			}
			return fmt.Errorf("unknown field %q; known fields: %s", k, strings.Join(ruleKeys, ", "))
		}
		if seen[k] {
			return fmt.Errorf("duplicate field %q", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// MatchesHost reports whether r admits a connection to host (a name as in a URL, or an IP
// literal without brackets) on port. Names compare case-insensitively; an IP literal is
// compared in its canonical form ("2001:DB8:0::1" is "2001:db8::1").
func (r EgressRule) MatchesHost(host string, port uint16) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	return hostMatches(r.Host, canonicalHost(host))
}

// canonicalHost is host as rules spell it: a zone-less IP literal in canonical form, anything
// else lowercased (a zoned address then matches no valid rule).
func canonicalHost(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		return a.String()
	}
	return strings.ToLower(host)
}

func hostMatches(pattern, host string) bool {
	if host == "" {
		return false
	}
	if pattern == host {
		return true
	}
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasPrefix(suffix, ".") && len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}

// AllowsRequest reports whether r, once it matches the host, admits a request with method and
// path (the decoded path, as the server will see it, without the query). A path with a dot or
// empty segment never matches a path rule: "/repos/acme/../other" must not pass "/repos/acme/".
func (r EgressRule) AllowsRequest(method, path string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	if !strings.HasPrefix(path, "/") || dotOrEmptySegment(path) {
		return false
	}
	for _, p := range r.Paths {
		if PathUnder(path, p) {
			return true
		}
	}
	return false
}

// PathUnder reports whether path is prefix or lies under it, a path prefix ending at a segment
// boundary: "/repos/acme" admits "/repos/acme" and "/repos/acme/x", never "/repos/acmeevil"
// nor "/repos/acme;x"; "/repos/acme/" admits what starts with it.
func PathUnder(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || strings.HasSuffix(prefix, "/") || path[len(prefix)] == '/'
}

// EgressDecision is what a grant's egress says about a connection to one host and port.
type EgressDecision struct {
	// Allowed: some rule matches the host and port.
	Allowed bool
	// Inspect: a matching rule restricts methods or paths, so requests must be read.
	Inspect bool
}

// DecideHost applies rules to a connection to host:port.
func DecideHost(rules []EgressRule, host string, port uint16) EgressDecision {
	var d EgressDecision
	for _, r := range rules {
		if r.MatchesHost(host, port) {
			d.Allowed = true
			if r.Restricted() {
				d.Inspect = true
			}
		}
	}
	return d
}

// RequestAllowed reports whether some rule matching host:port admits method and path.
func RequestAllowed(rules []EgressRule, host string, port uint16, method, path string) bool {
	for _, r := range rules {
		if r.MatchesHost(host, port) && r.AllowsRequest(method, path) {
			return true
		}
	}
	return false
}

// covers reports whether every connection and request c admits, p admits too.
func (p EgressRule) covers(c EgressRule) bool {
	if !hostCoveredBy([]string{p.Host}, c.Host) {
		return false
	}
	if p.Port != 0 && p.Port != c.Port {
		return false
	}
	if len(p.Methods) > 0 {
		if len(c.Methods) == 0 {
			return false
		}
		for _, m := range c.Methods {
			if !slices.Contains(p.Methods, m) {
				return false
			}
		}
	}
	if len(p.Paths) > 0 {
		if len(c.Paths) == 0 {
			return false
		}
		for _, cp := range c.Paths {
			if !slices.ContainsFunc(p.Paths, func(pp string) bool { return PathUnder(cp, pp) }) {
				return false
			}
		}
	}
	return true
}

// NormalRules returns rules in a grant's normal form: it lowercases hosts, sorts and dedupes each rule's methods and paths, then sorts
// the rules by their JSON form and removes duplicates. Never nil.
func NormalRules(in []EgressRule) []EgressRule {
	out := make([]EgressRule, 0, len(in))
	for _, r := range in {
		r.Host = strings.ToLower(r.Host)
		if r.Host == "" {
			continue
		}
		r.Methods = sortedSet(r.Methods, strings.ToUpper)
		r.Paths = sortedSet(r.Paths, func(s string) string { return s })
		if len(r.Methods) == 0 {
			r.Methods = nil
		}
		if len(r.Paths) == 0 {
			r.Paths = nil
		}
		out = append(out, r)
	}
	key := func(r EgressRule) string { b, _ := r.MarshalJSON(); return string(b) }
	slices.SortFunc(out, func(a, b EgressRule) int { return strings.Compare(key(a), key(b)) })
	return slices.CompactFunc(out, func(a, b EgressRule) bool { return key(a) == key(b) })
}

// EgressRules parses each string form; the first error is returned.
func EgressRules(ss ...string) ([]EgressRule, error) {
	out := make([]EgressRule, 0, len(ss))
	for _, s := range ss {
		r, err := ParseEgressRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// MustEgressRules is [EgressRules] for rules written in code: it panics on a malformed one.
func MustEgressRules(ss ...string) []EgressRule {
	rs, err := EgressRules(ss...)
	if err != nil {
		panic(err)
	}
	return rs
}
