package grant

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEgressRule(t *testing.T) {
	tests := []struct {
		in      string
		want    EgressRule
		str     string // String(), when not in
		wantErr string // part of the error
	}{
		{in: "proxy.golang.org", want: EgressRule{Host: "proxy.golang.org"}},
		{in: "proxy.golang.org:443", want: EgressRule{Host: "proxy.golang.org", Port: 443}},
		{in: "*.npmjs.org", want: EgressRule{Host: "*.npmjs.org"}},
		{in: "*.npmjs.org:443", want: EgressRule{Host: "*.npmjs.org", Port: 443}},
		{in: "localhost:65535", want: EgressRule{Host: "localhost", Port: 65535}},
		{in: "192.0.2.1", want: EgressRule{Host: "192.0.2.1"}},
		{in: "127.0.0.2:8443", want: EgressRule{Host: "127.0.0.2", Port: 8443}},
		{in: "[2001:db8::1]:443", want: EgressRule{Host: "2001:db8::1", Port: 443}},
		{in: "[2001:db8::1]", want: EgressRule{Host: "2001:db8::1"}},
		{in: "[2001:DB8:0::1]:443", want: EgressRule{Host: "2001:db8::1", Port: 443}, str: "[2001:db8::1]:443"},
		{in: "API.GitHub.com", want: EgressRule{Host: "api.github.com"}, str: "api.github.com"},
		{in: "*.Example.COM:80", want: EgressRule{Host: "*.example.com", Port: 80}, str: "*.example.com:80"},

		{in: "api.github.com:0", wantErr: `port "0": want a number from 1 to 65535`},
		{in: "api.github.com:65536", wantErr: `port "65536"`},
		{in: "api.github.com:0443", wantErr: `port "0443"`},
		{in: "api.github.com:", wantErr: `port ""`},
		{in: "api.github.com:+443", wantErr: `port "+443"`},
		{in: "api.github.com:https", wantErr: `port "https"`},
		{in: "2001:db8::1", wantErr: "write an IPv6 address in brackets, [2001:db8::1]"},
		{in: "2001:db8::1:443", wantErr: "write an IPv6 address in brackets"},
		{in: "2001:db8::1:99999", wantErr: "write an IPv6 address in brackets, [2001:db8::1]:99999"},
		{in: "api.github.com:443:1", wantErr: "want host or host:port"},
		{in: "[2001:db8::1", wantErr: "missing ]"},
		{in: "[2001:db8::1]443", wantErr: "want [address]:port"},
		{in: "[192.0.2.1]:443", wantErr: "brackets hold only an IPv6 address"},
		{in: "[fe80::1%eth0]:443", wantErr: "brackets hold only an IPv6 address"},
		{in: "[api.github.com]", wantErr: "brackets hold only an IPv6 address"},
		{in: "1.2.3", wantErr: `egress host "1.2.3"`},
		{in: "1.2.3.4.5", wantErr: `egress host "1.2.3.4.5"`},
		{in: "010.0.0.1", wantErr: `egress host "010.0.0.1"`},
		{in: "*.10", wantErr: `egress host "*.10"`},
		{in: "https://api.github.com", wantErr: "not a URL"},
		{in: "api.github.com/repos", wantErr: "not a URL"},
		{in: "*", wantErr: `egress host "*"`},
		{in: "*.*.example.com", wantErr: `egress host "*.*.example.com"`},
		{in: "bad_host.com", wantErr: `egress host "bad_host.com"`},
		{in: "api.github.com.", wantErr: `egress host "api.github.com."`},
		{in: "", wantErr: `egress host ""`},
		{in: ":443", wantErr: `egress host ""`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEgressRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseEgressRule(%q) = %+v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEgressRule(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseEgressRule(%q) (-want +got):\n%s", tt.in, diff)
			}
			wantStr := tt.str
			if wantStr == "" {
				wantStr = tt.in
			}
			if got.String() != wantStr {
				t.Errorf("String() = %q, want %q", got.String(), wantStr)
			}
			again, err := ParseEgressRule(got.String())
			if err != nil || !cmp.Equal(again, got) {
				t.Errorf("ParseEgressRule(String()) = %+v, %v; want %+v", again, err, got)
			}
			var u EgressRule
			if err := u.UnmarshalText([]byte(tt.in)); err != nil || !cmp.Equal(u, got) {
				t.Errorf("UnmarshalText = %+v, %v; want %+v", u, err, got)
			}
		})
	}
}

func TestEgressRule_Validate(t *testing.T) {
	tests := []struct {
		name    string
		r       EgressRule
		wantErr string
	}{
		{name: "plain", r: EgressRule{Host: "api.github.com"}},
		{name: "restricted", r: EgressRule{Host: "api.github.com", Port: 443, Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/", "/"}}},
		{name: "uppercase host", r: EgressRule{Host: "API.github.com"}, wantErr: `egress host "API.github.com"`},
		{name: "non-canonical IPv6", r: EgressRule{Host: "2001:db8:0::1"}, wantErr: "write the IP address as 2001:db8::1"},
		{name: "lowercase method", r: EgressRule{Host: "a.example", Methods: []string{"get"}}, wantErr: `method "get"`},
		{name: "empty method", r: EgressRule{Host: "a.example", Methods: []string{""}}, wantErr: `method ""`},
		{name: "too many methods", r: EgressRule{Host: "a.example", Methods: strings.Fields(strings.Repeat("GET ", maxRuleMethods+1))}, wantErr: "more than 16 methods"},
		{name: "relative path", r: EgressRule{Host: "a.example", Paths: []string{"repos/"}}, wantErr: `want a path starting with "/"`},
		{name: "dot-dot path", r: EgressRule{Host: "a.example", Paths: []string{"/repos/../x"}}, wantErr: `".." segments`},
		{name: "dot path", r: EgressRule{Host: "a.example", Paths: []string{"/repos/./x"}}, wantErr: `".." segments`},
		{name: "empty segment", r: EgressRule{Host: "a.example", Paths: []string{"/repos//x"}}, wantErr: "empty"},
		{name: "trailing dot-dot", r: EgressRule{Host: "a.example", Paths: []string{"/repos/.."}}, wantErr: `".." segments`},
		{name: "percent", r: EgressRule{Host: "a.example", Paths: []string{"/repos/%2e%2e/"}}, wantErr: `"%"`},
		{name: "query", r: EgressRule{Host: "a.example", Paths: []string{"/repos?x=1"}}, wantErr: `"?"`},
		{name: "backslash", r: EgressRule{Host: "a.example", Paths: []string{`/repos\x`}}, wantErr: `"\"`},
		{name: "space", r: EgressRule{Host: "a.example", Paths: []string{"/a b"}}, wantErr: "spaces"},
		{name: "non-ASCII", r: EgressRule{Host: "a.example", Paths: []string{"/é"}}, wantErr: "non-ASCII"},
		{name: "long path", r: EgressRule{Host: "a.example", Paths: []string{"/" + strings.Repeat("a", maxRulePath)}}, wantErr: "longer than 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestEgressRule_JSON(t *testing.T) {
	t.Run("an unrestricted rule is the old string", func(t *testing.T) {
		for _, s := range []string{"api.github.com", "*.npmjs.org", "192.0.2.1", "api.github.com:443", "[2001:db8::1]:8443"} {
			r, err := ParseEgressRule(s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(s)
			if string(got) != string(want) {
				t.Errorf("json.Marshal(%q) = %s, want %s", s, got, want)
			}
		}
		// A grant written before rules keeps its bytes, hence its digest.
		old, _ := json.Marshal(map[string][]string{"egress": {"*.github.com", "api.example.com"}})
		now, _ := json.Marshal(map[string][]EgressRule{"egress": rules("*.github.com", "api.example.com")})
		if string(old) != string(now) {
			t.Errorf("grant JSON changed: %s, was %s", now, old)
		}
	})
	t.Run("object round trip", func(t *testing.T) {
		r := EgressRule{Host: "api.github.com", Port: 443, Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"host":"api.github.com","port":443,"methods":["GET"],"paths":["/repos/acme/"]}`; string(b) != want {
			t.Errorf("json.Marshal = %s, want %s", b, want)
		}
		var got EgressRule
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})
	t.Run("read", func(t *testing.T) {
		tests := []struct {
			in      string
			want    EgressRule
			wantErr string
		}{
			{in: `"API.github.com:443"`, want: EgressRule{Host: "api.github.com", Port: 443}},
			{in: ` {"host": "API.github.com", "methods": []} `, want: EgressRule{Host: "api.github.com"}},
			{in: `{"host":"a.example","paths":["/x/"]}`, want: EgressRule{Host: "a.example", Paths: []string{"/x/"}}},
			{in: `{"host":"a.example","scheme":"http"}`, wantErr: `unknown field "scheme"; known fields: host, methods, paths, port`},
			{in: `{"Host":"a.example"}`, wantErr: `unknown field "Host"`},
			{in: `{"host":"a.example","host":"b.example"}`, wantErr: `duplicate field "host"`},
			{in: `{"host":"a.example","port":0443}`, wantErr: "invalid character"},
			{in: `{"host":"a.example","port":65536}`, wantErr: "egress rule"},
			{in: `{"host":"a.example","port":-1}`, wantErr: "egress rule"},
			{in: `{"host":"a.example","paths":["/a/../b"]}`, wantErr: `path "/a/../b"`},
			{in: `{"host":"a.example","methods":["get"]}`, wantErr: `method "get"`},
			{in: `{"port":443}`, wantErr: `egress host ""`},
			{in: `"2001:db8::1"`, wantErr: "brackets"},
			{in: `null`, wantErr: `egress host ""`},
			{in: `["a.example"]`, wantErr: "egress rule"},
			{in: `42`, wantErr: "egress rule"},
		}
		for _, tt := range tests {
			t.Run(tt.in, func(t *testing.T) {
				var got EgressRule
				err := json.Unmarshal([]byte(tt.in), &got)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Unmarshal(%s) = %+v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Unmarshal(%s): %v", tt.in, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Unmarshal(%s) (-want +got):\n%s", tt.in, diff)
				}
			})
		}
	})
}

func TestEgressRule_MatchesHost(t *testing.T) {
	tests := []struct {
		rule string
		host string
		port uint16
		want bool
	}{
		{"api.github.com", "api.github.com", 443, true},
		{"api.github.com", "api.github.com", 8080, true},
		{"api.github.com", "API.GitHub.com", 443, true},
		{"api.github.com", "x.api.github.com", 443, false},
		{"api.github.com", "api.github.com.", 443, false},
		{"api.github.com", "", 443, false},
		{"api.github.com:443", "api.github.com", 443, true},
		{"api.github.com:443", "api.github.com", 80, false},
		{"*.github.com", "raw.github.com", 443, true},
		{"*.github.com", "a.b.github.com", 80, true},
		{"*.github.com", "github.com", 443, false},
		{"*.github.com", "evilgithub.com", 443, false},
		{"*.github.com", ".github.com", 443, false},
		{"*.github.com:443", "raw.github.com", 80, false},
		{"192.0.2.1", "192.0.2.1", 80, true},
		{"192.0.2.1", "192.0.2.10", 80, false},
		{"[2001:db8::1]:443", "2001:db8::1", 443, true},
		{"[2001:db8::1]:443", "2001:DB8:0::1", 443, true},
		{"[2001:db8::1]:443", "2001:db8::1%eth0", 443, false},
		{"[2001:db8::1]:443", "2001:db8::1", 80, false},
	}
	for _, tt := range tests {
		r := rules(tt.rule)[0]
		if got := r.MatchesHost(tt.host, tt.port); got != tt.want {
			t.Errorf("%q.MatchesHost(%q, %d) = %v, want %v", tt.rule, tt.host, tt.port, got, tt.want)
		}
	}
}

func TestEgressRule_AllowsRequest(t *testing.T) {
	r := EgressRule{Host: "api.github.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/", "/meta"}}
	tests := []struct {
		method, path string
		want         bool
	}{
		{"GET", "/repos/acme/widget", true},
		{"HEAD", "/repos/acme/", true},
		{"GET", "/meta", true},
		{"GET", "/meta/x", true},
		{"GET", "/metadata", false}, // attack: a prefix ends at a segment boundary
		{"GET", "/meta;x", false},
		{"GET", "/meta/", true},
		{"GET", "/repos/acme/..;/other", false}, // attack: "..;" is ".." to servers that strip parameters
		{"GET", "/repos/acme/.;x/other", false},
		{"GET", "/repos/acme/x;y/z", true},
		{"POST", "/repos/acme/widget", false},
		{"get", "/repos/acme/widget", false},
		{"GET", "/repos/acme", false},
		{"GET", "/repos/other/x", false},
		{"GET", "/", false},
		{"GET", "", false},
		{"GET", "repos/acme/x", false},
		{"GET", "/repos/acme/../other", false},
		{"GET", "/repos/acme/..", false},
		{"GET", "/repos/acme//x", false},
		{"GET", "/repos/acme/./x", false},
		{"GET", "/repos/acme/x/.", false},
		{"GET", "/repos/acme/x/", true},
	}
	for _, tt := range tests {
		if got := r.AllowsRequest(tt.method, tt.path); got != tt.want {
			t.Errorf("AllowsRequest(%q, %q) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
	if !(EgressRule{Host: "a.example"}).AllowsRequest("DELETE", "/a/../b") {
		t.Errorf("a rule without methods or paths refused a request; the host and port are all it limits")
	}
	if !(EgressRule{Host: "a.example", Methods: []string{"GET"}}).AllowsRequest("GET", "/anything") {
		t.Errorf("a rule with methods only refused a path")
	}
}

// Attack (HIGH): a narrowing that names "/repos/acmeevil" under a parent's "/repos/acme" is
// not covered, since the parent's prefix stops at a segment boundary.
func TestEgressRule_CoversPathAtSegmentBoundary(t *testing.T) {
	parent := EgressRule{Host: "a.example", Paths: []string{"/repos/acme"}}
	for child, want := range map[string]bool{"/repos/acme": true, "/repos/acme/": true, "/repos/acme/x": true, "/repos/acmeevil": false, "/repos/acme-x/": false} {
		if got := parent.covers(EgressRule{Host: "a.example", Paths: []string{child}}); got != want {
			t.Errorf("%q covers %q = %v, want %v", parent.Paths[0], child, got, want)
		}
	}
}

func TestDecideHost(t *testing.T) {
	rs := []EgressRule{
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}},
		{Host: "*.github.com", Port: 443},
		{Host: "proxy.golang.org"},
	}
	tests := []struct {
		host string
		port uint16
		want EgressDecision
	}{
		{"proxy.golang.org", 443, EgressDecision{Allowed: true}},
		{"raw.github.com", 443, EgressDecision{Allowed: true}},
		{"raw.github.com", 80, EgressDecision{}},
		{"api.github.com", 443, EgressDecision{Allowed: true, Inspect: true}},
		{"api.github.com", 80, EgressDecision{Allowed: true, Inspect: true}},
		{"evil.example", 443, EgressDecision{}},
	}
	for _, tt := range tests {
		if got := DecideHost(rs, tt.host, tt.port); got != tt.want {
			t.Errorf("DecideHost(%q, %d) = %+v, want %+v", tt.host, tt.port, got, tt.want)
		}
	}
	// api.github.com:443 matches both the restricted rule and *.github.com:443: any matching
	// rule admits the request, so the wider one wins there, and only there.
	if !RequestAllowed(rs, "api.github.com", 443, "POST", "/x") {
		t.Errorf("RequestAllowed refused what *.github.com:443 grants")
	}
	if RequestAllowed(rs, "api.github.com", 80, "POST", "/x") {
		t.Errorf("RequestAllowed admitted a request only the restricted rule matches")
	}
	if !RequestAllowed(rs, "api.github.com", 80, "GET", "/repos/acme/x") {
		t.Errorf("RequestAllowed refused a request the restricted rule grants")
	}
}

func TestSet_NarrowEgressRules(t *testing.T) {
	tests := []struct {
		name   string
		parent EgressRule
		child  EgressRule
		want   bool
	}{
		{"equal", EgressRule{Host: "a.example", Port: 443}, EgressRule{Host: "a.example", Port: 443}, true},
		{"port under any port", EgressRule{Host: "a.example"}, EgressRule{Host: "a.example", Port: 443}, true},
		{"any port under a port", EgressRule{Host: "a.example", Port: 443}, EgressRule{Host: "a.example"}, false},
		{"other port", EgressRule{Host: "a.example", Port: 443}, EgressRule{Host: "a.example", Port: 80}, false},
		{"subdomain with a port under a wildcard", EgressRule{Host: "*.example.com"}, EgressRule{Host: "a.example.com", Port: 443}, true},
		{"apex under a wildcard", EgressRule{Host: "*.example.com"}, EgressRule{Host: "example.com"}, false},
		{"methods under none", EgressRule{Host: "a.example"}, EgressRule{Host: "a.example", Methods: []string{"GET"}}, true},
		{"no methods under methods", EgressRule{Host: "a.example", Methods: []string{"GET"}}, EgressRule{Host: "a.example"}, false},
		{"fewer methods", EgressRule{Host: "a.example", Methods: []string{"GET", "HEAD"}}, EgressRule{Host: "a.example", Methods: []string{"head"}}, true},
		{"other method", EgressRule{Host: "a.example", Methods: []string{"GET"}}, EgressRule{Host: "a.example", Methods: []string{"POST"}}, false},
		{"paths under none", EgressRule{Host: "a.example"}, EgressRule{Host: "a.example", Paths: []string{"/x/"}}, true},
		{"no paths under paths", EgressRule{Host: "a.example", Paths: []string{"/x/"}}, EgressRule{Host: "a.example"}, false},
		{"deeper path", EgressRule{Host: "a.example", Paths: []string{"/repos/acme/"}}, EgressRule{Host: "a.example", Paths: []string{"/repos/acme/widget/"}}, true},
		{"shallower path", EgressRule{Host: "a.example", Paths: []string{"/repos/acme/"}}, EgressRule{Host: "a.example", Paths: []string{"/repos/"}}, false},
		{"sibling path", EgressRule{Host: "a.example", Paths: []string{"/repos/acme/"}}, EgressRule{Host: "a.example", Paths: []string{"/repos/other/"}}, false},
		{"one path outside", EgressRule{Host: "a.example", Paths: []string{"/a/", "/b/"}}, EgressRule{Host: "a.example", Paths: []string{"/a/x", "/c/"}}, false},
		{"dot-dot out of a path", EgressRule{Host: "a.example", Paths: []string{"/repos/acme/"}}, EgressRule{Host: "a.example", Paths: []string{"/repos/acme/../other"}}, false},
		{"restricted under a wildcard with a port", EgressRule{Host: "*.github.com", Port: 443}, EgressRule{Host: "api.github.com", Port: 443, Methods: []string{"GET"}, Paths: []string{"/x/"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := Set{Egress: []EgressRule{tt.parent}}
			got, err := parent.Narrow(Set{Egress: []EgressRule{tt.child}})
			if !tt.want {
				var ne *NarrowError
				if !errors.As(err, &ne) || ne.Kind != "egress" {
					t.Fatalf("Narrow = %+v, %v; want an egress NarrowError", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Narrow: %v", err)
			}
			if len(got.Egress) != 1 || got.Egress[0].Host != tt.child.Host {
				t.Errorf("Narrow = %+v, want the child rule", got.Egress)
			}
		})
	}
}

func TestSet_NarrowNormalisesRules(t *testing.T) {
	parent := Set{Egress: rules("*.example.com")}
	child := Set{Egress: []EgressRule{
		{Host: "B.example.com", Methods: []string{"head", "GET", "GET"}, Paths: []string{"/z/", "/a/", "/a/"}},
		{Host: "a.example.com", Port: 443},
		{Host: "a.example.com", Port: 443},
		{Host: "a.example.com", Methods: []string{}, Paths: []string{}},
	}}
	got, err := parent.Narrow(child)
	if err != nil {
		t.Fatal(err)
	}
	want := []EgressRule{
		{Host: "a.example.com"},
		{Host: "a.example.com", Port: 443},
		{Host: "b.example.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/a/", "/z/"}},
	}
	if diff := cmp.Diff(want, got.Egress); diff != "" {
		t.Errorf("Narrow (-want +got):\n%s", diff)
	}
	item := ""
	if _, err := (Set{Egress: rules("a.example.com:443")}).Narrow(Set{Egress: []EgressRule{{Host: "a.example.com", Methods: []string{"GET"}, Paths: []string{"/x/"}}}}); err != nil {
		var ne *NarrowError
		if errors.As(err, &ne) {
			item = ne.Item
		}
	}
	if item != "a.example.com GET /x/" {
		t.Errorf("NarrowError.Item = %q, want the rule's summary", item)
	}
}

func TestSet_CloneCopiesRules(t *testing.T) {
	s := Set{Egress: []EgressRule{{Host: "a.example", Methods: []string{"GET"}, Paths: []string{"/x/"}}}}
	c := s.Clone()
	c.Egress[0].Methods[0], c.Egress[0].Paths[0] = "POST", "/y/"
	if s.Egress[0].Methods[0] != "GET" || s.Egress[0].Paths[0] != "/x/" {
		t.Errorf("Clone shares a rule's lists: %+v", s.Egress[0])
	}
	if (Set{}).Clone().Egress != nil {
		t.Errorf("Clone of a nil egress list is not nil")
	}
}
