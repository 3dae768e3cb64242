package kubernetes

import (
	"strings"
	"testing"
)

// A refused gateway URL says what is wrong and what to write instead ("https://localhost:8443
// is refused as 'host must be an IP address or a lowercase DNS name'" would tell a platform
// engineer nothing about why localhost cannot work).
func TestParseGatewayURL_RefusalSaysWhatToWrite(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://localhost:8443", "loopback, which no pod can reach"},
		{"https://agora.localhost:8443", "loopback, which no pod can reach"},
		{"https://GW.example:443", "lowercase (gw.example)"},
		{"https://gw:443", `"gw" is a single-label name`},
		{"https://gw_1.example:443", "lowercase letters, digits"},
	} {
		_, err := parseGatewayURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseGatewayURL(%q) = %v; want an error saying %q", c.url, err, c.want)
		}
	}
}
