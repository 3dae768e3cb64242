package catalog_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
)

// capability.yaml writes egress rules as strings or as objects; both decode into rules, and
// a malformed one is reported at its path.
func TestParseCapabilityDoc_EgressRuleForms(t *testing.T) {
	g, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(`egress:
  - Proxy.Golang.org
  - "*.npmjs.org:443"
  - {host: api.github.com, methods: [GET], paths: [/repos/acme/]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []grant.EgressRule{
		{Host: "proxy.golang.org"}, {Host: "*.npmjs.org", Port: 443},
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}},
	}
	if len(g.Egress) != 3 {
		t.Fatalf("egress = %+v", g.Egress)
	}
	for i := range want {
		if g.Egress[i].String() != want[i].String() {
			t.Errorf("egress[%d] = %s, want %s", i, g.Egress[i], want[i])
		}
	}
	for _, bad := range []struct{ yaml, want string }{
		{"egress: [\"a.com:0\"]", "egress[0]"},
		{"egress: [{host: a.com, verbs: [GET]}]", "verbs"},
		{"egress: [{host: a.com, paths: [/x/../y]}]", "egress[0]"},
		{"egress: [{host: a.com, methods: [get]}]", "egress[0]"},
		{"egress: [\"https://a.com/x\"]", "not a URL"},
	} {
		_, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(bad.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want one naming %s", bad.yaml, err, bad.want)
		}
	}
}
