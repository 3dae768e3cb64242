package remote

import (
	"strings"
	"testing"
)

// FuzzParseGrant: a claim's answer is a dispatch id with no path characters and a gateway
// token, or an error; never a panic.
func FuzzParseGrant(f *testing.F) {
	for _, s := range []string{
		`{"dispatch":"01ABC","token":"agw_x"}`,
		`{"dispatch":"01ABC","token":"agw_x"}{}`,
		`{"dispatch":"01/../x","token":"agw_x"}`,
		`{"dispatch":"01ABC","token":"agw_x","extra":1}`,
		`null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGrant([]byte(s))
		if err != nil {
			return
		}
		if g.Dispatch == "" || strings.ContainsAny(g.Dispatch, "/?#% ") || !strings.HasPrefix(g.Token, "agw_") {
			t.Fatalf("%q accepted as %+v", s, g)
		}
	})
}
