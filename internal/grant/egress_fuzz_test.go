package grant

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzEgressRule parses arbitrary strings as the string form and arbitrary bytes as JSON: it
// must never panic, and a rule either accepts is valid, re-marshals and re-parses to an equal
// rule, and (unrestricted) prints a string form that parses back to it.
func FuzzEgressRule(f *testing.F) {
	for _, s := range []string{
		"proxy.golang.org", "*.npmjs.org:443", "127.0.0.2:8443", "[2001:db8::1]:443", "[2001:DB8:0::1]",
		"API.GitHub.com", "api.github.com:0", "api.github.com:65536", "api.github.com:0443", "2001:db8::1",
		"1.2.3", "https://x.example/", "[fe80::1%eth0]", "[", "]:1", ":", "*.", "a:b:c",
		`"api.github.com"`,
		`{"host":"api.github.com","port":443,"methods":["GET"],"paths":["/repos/acme/"]}`,
		`{"host":"API.github.com","methods":[],"paths":[]}`,
		`{"host":"a.example","Host":"b.example"}`,
		`{"host":"a.example","paths":["/a/../b"]}`,
		`{"host":"a.example","port":-1}`,
		`null`, `[]`, `{"host":"a.example"} x`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseEgressRule(s); err == nil {
			checkRule(t, r)
			again, err := ParseEgressRule(r.String())
			if err != nil || !cmp.Equal(again, r) {
				t.Fatalf("ParseEgressRule(%q) = %+v; its String %q parses to %+v, %v", s, r, r.String(), again, err)
			}
		}
		var r EgressRule
		if err := json.Unmarshal([]byte(s), &r); err == nil {
			checkRule(t, r)
		}
	})
}

// checkRule checks that an accepted rule is valid and survives JSON unchanged.
func checkRule(t *testing.T, r EgressRule) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("accepted an invalid rule %+v: %v", r, err)
	}
	if r.Host != strings.ToLower(r.Host) {
		t.Fatalf("accepted a rule with an upper-case host %q", r.Host)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", r, err)
	}
	var again EgressRule
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatalf("rule %+v marshals to %s, which does not parse: %v", r, b, err)
	}
	if !cmp.Equal(again, r) {
		t.Fatalf("rule %+v marshals to %s, which parses to %+v", r, b, again)
	}
}

// FuzzEgressRequest asks a fixed rule set about arbitrary methods and paths: it must never
// panic, and a path a path rule admits never holds a "." or ".." segment or an empty one, so
// no request can climb out of the prefix it was granted under.
func FuzzEgressRequest(f *testing.F) {
	rs := []EgressRule{
		{Host: "api.github.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/", "/meta"}},
		{Host: "*.example.com", Port: 443, Paths: []string{"/v1/"}},
		{Host: "proxy.golang.org"},
	}
	for _, seed := range []struct{ host, method, path string }{
		{"api.github.com", "GET", "/repos/acme/x"},
		{"api.github.com", "GET", "/repos/acme/../other"},
		{"api.github.com", "GET", "/repos/acme//x"},
		{"api.github.com", "GET", "/repos/acme/./x"},
		{"api.github.com", "GET", "/repos/acme/x/.."},
		{"api.github.com", "POST", "/repos/acme/x"},
		{"api.github.com", "GET", "/meta."},
		{"a.example.com", "DELETE", "/v1/x"},
		{"proxy.golang.org", "GET", "/../../etc/passwd"},
		{"API.GITHUB.COM", "GET", ""},
	} {
		f.Add(seed.host, uint16(443), seed.method, seed.path)
	}
	f.Fuzz(func(t *testing.T, host string, port uint16, method, path string) {
		if !RequestAllowed(rs, host, port, method, path) {
			return
		}
		if DecideHost(rs, host, port).Allowed == false {
			t.Fatalf("RequestAllowed admitted %s:%d, which DecideHost refuses", host, port)
		}
		for _, r := range rs {
			if !r.MatchesHost(host, port) || len(r.Paths) == 0 || !r.AllowsRequest(method, path) {
				continue
			}
			if !strings.HasPrefix(path, "/") || strings.Contains(path, "//") || dotOrEmptySegment(path) {
				t.Fatalf("rule %s admitted %s %q", r, method, path)
			}
			for seg := range strings.SplitSeq(path, "/") {
				if seg == "." || seg == ".." {
					t.Fatalf("rule %s admitted %s %q with a dot segment", r, method, path)
				}
			}
		}
	})
}
