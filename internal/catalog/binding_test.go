package catalog_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
)

// TestEnvDoc_UnboundBytesUnchanged pins the bytes (and so the digest) of an env document
// without bindings to what agora wrote before bindings existed: adding the field must not give
// any registered bundle a new version.
func TestEnvDoc_UnboundBytesUnchanged(t *testing.T) {
	tests := []struct {
		name string
		doc  catalog.EnvDoc
		want string
	}{
		{"empty", catalog.EnvDoc{}, `{"secrets":{},"values":{},"version":1}`},
		{"nil bindings", catalog.EnvDoc{Values: map[string]string{"A": "1"}, Secrets: map[string]string{"T": "sec_ab"}},
			`{"secrets":{"T":"sec_ab"},"values":{"A":"1"},"version":1}`},
		{"empty bindings", catalog.EnvDoc{Secrets: map[string]string{"T": "sec_ab"}, Bindings: map[string]catalog.Binding{}},
			`{"secrets":{"T":"sec_ab"},"values":{},"version":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.doc.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal = %s, want %s", b, tt.want)
			}
			if got, want := digest.Sum(b), digest.Sum([]byte(tt.want)); got != want {
				t.Errorf("digest = %s, want %s", got, want)
			}
		})
	}
}

func TestEnvDoc_BindingsRoundTrip(t *testing.T) {
	doc := catalog.EnvDoc{
		Values:  map[string]string{"LOG": "debug"},
		Secrets: map[string]string{"GITHUB_TOKEN": "sec_01", "NPM": "sec_02"},
		Bindings: map[string]catalog.Binding{
			"GITHUB_TOKEN": {Hosts: []string{"api.github.com", "github.com"}, Headers: []string{"X-Api-Key"}},
			"NPM":          {Hosts: []string{"*.npmjs.org", "192.0.2.1", "2001:db8::1"}, Headers: []string{}},
		},
	}
	b, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bindings":{"GITHUB_TOKEN":{"headers":["X-Api-Key"],"hosts":["api.github.com","github.com"]},` +
		`"NPM":{"headers":[],"hosts":["*.npmjs.org","192.0.2.1","2001:db8::1"]}},` +
		`"secrets":{"GITHUB_TOKEN":"sec_01","NPM":"sec_02"},"values":{"LOG":"debug"},"version":2}`
	if string(b) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", b, want)
	}
	got, err := catalog.ParseEnvDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestParseEnvDoc_RefusesBadBindings(t *testing.T) {
	const secrets = `"secrets":{"T":"sec_01"},"values":{"V":"x"}`
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"version 1 with bindings", `{"bindings":{"T":{"hosts":["a.example"]}},` + secrets + `,"version":1}`, "version 1 cannot have bindings"},
		{"version 1 with empty bindings", `{"bindings":{},` + secrets + `,"version":1}`, "version 1 cannot have bindings"},
		{"version 2 without bindings", `{` + secrets + `,"version":2}`, "version 2 without bindings"},
		{"version 3", `{` + secrets + `,"version":3}`, "unsupported version 3"},
		{"plain value bound", `{"bindings":{"V":{"hosts":["a.example"]}},` + secrets + `,"version":2}`, "V is a plain value, not a secret"},
		{"unknown key bound", `{"bindings":{"X":{"hosts":["a.example"]}},` + secrets + `,"version":2}`, "the bundle has no secret X (its secrets: T)"},
		{"no hosts", `{"bindings":{"T":{"hosts":[]}},` + secrets + `,"version":2}`, "binding T: no hosts"},
		{"bad host", `{"bindings":{"T":{"hosts":["a.example:443"]}},` + secrets + `,"version":2}`, `host "a.example:443"`},
		{"unsorted hosts", `{"bindings":{"T":{"hosts":["b.example","a.example"]}},` + secrets + `,"version":2}`, "sorted and unique"},
		{"bad header", `{"bindings":{"T":{"hosts":["a.example"],"headers":["Host"]}},` + secrets + `,"version":2}`, `header "Host" cannot be bound`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := catalog.ParseEnvDoc([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseEnvDoc = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckBindingHost(t *testing.T) {
	good := []string{"api.github.com", "github.com", "localhost", "*.example.com", "x1.example.com", "192.0.2.1",
		"2001:db8::1", "::1", "a-b.example", "api.github.com:443", "api.github.com:8443", "*.example.com:8443",
		"192.0.2.1:8443", "[2001:db8::1]:8443", "[::1]"}
	bad := []string{"", "API.github.com", "https://api.github.com", "api.github.com/path",
		"*", "*.", "a..b", "-a.example", "127.1", "0x7f.1", "192.000.2.1", "2001:DB8::1", "2001:db8:0::1",
		"fe80::1%eth0", "*.192.0.2.1", "a.example.", "user@a.example", "a b", "api.github.com:", "api.github.com:0",
		"api.github.com:65536", "api.github.com:08443", "api.github.com:x", "API.github.com:8443", "[2001:DB8::1]:8443",
		"[2001:db8::1", "[a.example]:443", "http://api.github.com:80"}
	for _, h := range good {
		if err := catalog.CheckBindingHost(h); err != nil {
			t.Errorf("CheckBindingHost(%q) = %v, want ok", h, err)
		}
	}
	for _, h := range bad {
		err := catalog.CheckBindingHost(h)
		if err == nil || !strings.Contains(err.Error(), "host ") {
			t.Errorf("CheckBindingHost(%q) = %v, want an error naming the host", h, err)
		}
	}
}

func TestCheckBindingHeader(t *testing.T) {
	for _, h := range []string{"X-Api-Key", "Private-Token", "Cookie", "X-Goog-Api-Key", "Api_key"} {
		if err := catalog.CheckBindingHeader(h); err != nil {
			t.Errorf("CheckBindingHeader(%q) = %v, want ok", h, err)
		}
	}
	tests := []struct{ h, want string }{
		{"", "want a header name"},
		{"X Api", "want a header name"},
		{"X-Api-Key:", "want a header name"},
		{strings.Repeat("A", 129), "want a header name"},
		{"x-api-key", "canonical form, X-Api-Key"},
		{"Authorization", "always swapped"},
		{"authorization", "always swapped"},
		{"Host", "cannot be bound"},
		{"Content-Length", "cannot be bound"},
		{"Transfer-Encoding", "cannot be bound"},
		{"Connection", "cannot be bound"},
		{"Keep-Alive", "cannot be bound"},
		{"TE", "cannot be bound"},
		{"Trailer", "cannot be bound"},
		{"Upgrade", "cannot be bound"},
		{"Proxy-Authorization", "Proxy- headers"},
		{"proxy-connection", "Proxy- headers"},
	}
	for _, tt := range tests {
		err := catalog.CheckBindingHeader(tt.h)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckBindingHeader(%q) = %v, want an error containing %q", tt.h, err, tt.want)
		}
	}
}

func TestNormalizeBinding(t *testing.T) {
	got := catalog.NormalizeBinding(catalog.Binding{
		Hosts:   []string{"github.com", "api.github.com", "github.com"},
		Headers: []string{"x-api-key", "X-Api-Key", "private-token", "bad header"},
	})
	want := catalog.Binding{Hosts: []string{"api.github.com", "github.com"}, Headers: []string{"Private-Token", "X-Api-Key", "bad header"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NormalizeBinding mismatch (-want +got):\n%s", diff)
	}
	// Port 443 is the default and not written; another port is; IPv6 on 443 has no brackets.
	got = catalog.NormalizeBinding(catalog.Binding{Hosts: []string{"a.example:443", "a.example", "b.example:8443", "[::1]", "[::1]:8443", "Bad.example:443"}})
	if want := []string{"::1", "Bad.example:443", "[::1]:8443", "a.example", "b.example:8443"}; !slices.Equal(got.Hosts, want) {
		t.Errorf("NormalizeBinding hosts = %q, want %q", got.Hosts, want)
	}
	if got := catalog.NormalizeBinding(catalog.Binding{Hosts: []string{"a.example"}}); got.Headers == nil {
		t.Errorf("NormalizeBinding left Headers nil; stored form has []")
	}
}

func TestCheckBindings_AllProblems(t *testing.T) {
	bindings := map[string]catalog.Binding{
		"A": {Hosts: []string{"ok.example", "Bad.example"}, Headers: []string{"Host"}},
		"B": {Hosts: []string{}},
		"V": {Hosts: []string{"ok.example"}},
	}
	got := catalog.CheckBindings(bindings, map[string]string{"V": "x"}, map[string][]byte{"A": nil, "B": nil})
	want := []string{
		`binding A: host "Bad.example": write it as bad.example (lower case, an address in canonical form)`,
		`binding A: header "Host" cannot be bound: Host names the server`,
		`binding A: hosts and headers must be sorted and unique`,
		`binding B: no hosts; bind a secret to at least one host`,
		`binding V: V is a plain value, not a secret; only a secret can be bound to hosts`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckBindings mismatch (-want +got):\n%s", diff)
	}
}
