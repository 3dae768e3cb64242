package grant

import (
	"strings"
	"testing"
)

func TestParseBoundHost(t *testing.T) {
	tests := []struct {
		in, host string
		port     uint16
		stored   string
	}{
		{"api.github.com", "api.github.com", 443, "api.github.com"},
		{"api.github.com:443", "api.github.com", 443, "api.github.com"},
		{"api.github.com:8443", "api.github.com", 8443, "api.github.com:8443"},
		{"*.example.com:8443", "*.example.com", 8443, "*.example.com:8443"},
		{"192.0.2.1", "192.0.2.1", 443, "192.0.2.1"},
		{"192.0.2.1:80", "192.0.2.1", 80, "192.0.2.1:80"},
		{"2001:db8::1", "2001:db8::1", 443, "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1", 443, "2001:db8::1"},
		{"[2001:db8::1]:8443", "2001:db8::1", 8443, "[2001:db8::1]:8443"},
	}
	for _, tt := range tests {
		r, err := ParseBoundHost(tt.in)
		if err != nil {
			t.Errorf("ParseBoundHost(%q) = %v", tt.in, err)
			continue
		}
		if r.Host != tt.host || r.Port != tt.port || BoundHostString(r) != tt.stored {
			t.Errorf("ParseBoundHost(%q) = %s port %d stored %q, want %s port %d stored %q", tt.in, r.Host, r.Port, BoundHostString(r), tt.host, tt.port, tt.stored)
		}
	}
	for _, in := range []string{"", "API.example.com", "a.example:0", "a.example:", "a.example:65536", "https://a.example",
		"a.example/x", "[a.example]:443", "2001:DB8::1", "[2001:DB8::1]:443", "fe80::1%eth0", "127.1", "a.example:044"} {
		if r, err := ParseBoundHost(in); err == nil {
			t.Errorf("ParseBoundHost(%q) = %+v, want an error", in, r)
		}
	}
}

// FuzzParseBoundHost: a bound host that parses has a port, and its stored form parses back to
// the same host and port (so a binding reads the same after it is stored).
func FuzzParseBoundHost(f *testing.F) {
	for _, s := range []string{"api.github.com", "a.example:8443", "[::1]:443", "::1", "*.x.example:1", "[::1", "A.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseBoundHost(s)
		if err != nil {
			if !strings.Contains(err.Error(), "host") && !strings.Contains(err.Error(), "egress") {
				t.Fatalf("error %q names neither the host nor the entry", err)
			}
			return
		}
		if r.Port == 0 {
			t.Fatalf("ParseBoundHost(%q) has no port", s)
		}
		back, err := ParseBoundHost(BoundHostString(r))
		if err != nil || back.Host != r.Host || back.Port != r.Port {
			t.Fatalf("stored form %q of %q reads back as %+v, %v", BoundHostString(r), s, back, err)
		}
	})
}
