package gatewayurl

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, ok := range []string{"https://10.0.0.1:8443", "https://10.0.0.1:8443/", "https://[fd00::1]:443", "https://gw.example:443", "https://agora-gw.agents.svc.cluster.local:8443"} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("Parse(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "http://10.0.0.1:80", "https://gw:443", "https://GW.example:443", "https://-gw.example:443", "https://gw_1.example:443", "https://10.1:443", "https://10.0.0.1", "https://10.0.0.1:0",
		"https://u:p@10.0.0.1:1", "https://10.0.0.1:1/x", "https://10.0.0.1:1?q", "https://[fe80::1%25eth0]:1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// A refused gateway URL says what is wrong and what to write instead ("https://localhost:8443
// is refused as 'host must be an IP address or a lowercase DNS name'" would tell a platform
// engineer nothing about why localhost cannot work).
func TestParse_RefusalSaysWhatToWrite(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://localhost:8443", "loopback, which no pod can reach"},
		{"https://agora.localhost:8443", "loopback, which no pod can reach"},
		{"https://GW.example:443", "lowercase (gw.example)"},
		{"https://gw:443", `"gw" is a single-label name`},
		{"https://gw_1.example:443", "lowercase letters, digits"},
	} {
		_, err := Parse(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v; want an error saying %q", c.url, err, c.want)
		}
	}
}

func FuzzParseGatewayURL(f *testing.F) {
	f.Add("https://10.0.0.1:8443")
	f.Add("https://[::1]:1/")
	f.Add("https://gw.agents.example:8443")
	f.Fuzz(func(t *testing.T, s string) {
		gw, err := Parse(s)
		if err != nil {
			return
		}
		ok := gw.Port != 0
		if gw.Name == "" {
			ok = ok && gw.IP.IsValid() && gw.IP.Zone() == ""
		} else {
			// A name must be one a pod's hostAliases takes, and never an address.
			_, perr := netip.ParseAddr(gw.Name)
			ok = ok && !gw.IP.IsValid() && ValidDNSName(gw.Name) && perr != nil && gw.Name == strings.ToLower(gw.Name)
		}
		if !ok {
			t.Errorf("Parse(%q) = %+v", s, gw)
		}
	})
}
