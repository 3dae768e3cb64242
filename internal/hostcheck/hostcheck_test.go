package hostcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

func TestNames_HostAndOrigin(t *testing.T) {
	loop := New("127.0.0.1:8080", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, []string{"agora.internal"})
	tests := []struct {
		name     string
		host     string
		origin   string
		fetch    string
		hostOK   bool
		originOK bool
	}{
		{name: "bound address", host: "127.0.0.1:8080", hostOK: true, originOK: true},
		{name: "localhost", host: "LOCALHOST:8080", hostOK: true, originOK: true},
		{name: "allowed host", host: "agora.internal:8080", hostOK: true, originOK: true},
		{name: "rebound name", host: "evil.example:8080", originOK: true},
		{name: "other port", host: "127.0.0.1:9090", originOK: true},
		{name: "same origin", host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080", hostOK: true, originOK: true},
		{name: "cross-site origin", host: "127.0.0.1:8080", origin: "http://evil.example", hostOK: true},
		{name: "null origin", host: "127.0.0.1:8080", origin: "null", hostOK: true},
		{name: "origin with user", host: "127.0.0.1:8080", origin: "http://u@127.0.0.1:8080", hostOK: true},
		{name: "cross-site fetch without origin", host: "127.0.0.1:8080", fetch: "cross-site", hostOK: true},
		{name: "same-site fetch without origin", host: "127.0.0.1:8080", fetch: "same-site", hostOK: true},
		{name: "typed url", host: "127.0.0.1:8080", fetch: "none", hostOK: true, originOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.fetch != "" {
				r.Header.Set("Sec-Fetch-Site", tt.fetch)
			}
			if got := loop.HostOK(r); got != tt.hostOK {
				t.Errorf("HostOK = %v, want %v", got, tt.hostOK)
			}
			if got := loop.OriginOK(r); got != tt.originOK {
				t.Errorf("OriginOK = %v, want %v", got, tt.originOK)
			}
		})
	}
}

func TestNames_AnyLocal(t *testing.T) {
	n := New(":8080", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, nil)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "10.0.0.5:8080"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}))
	if !n.HostOK(r) {
		t.Error("HostOK refused the address the connection arrived on")
	}
	r.Host = "evil.example:8080"
	if n.HostOK(r) {
		t.Error("HostOK accepted a name for an every-interface bind")
	}
}

// FuzzNames_OriginOK: no Origin value crashes the check, and one accepted always names the
// bound address.
func FuzzNames_OriginOK(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080", "null", "http://evil", "http://[::1]:8080", "https://localhost:8080", "%zz"} {
		f.Add(s)
	}
	n := New("127.0.0.1:8080", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, nil)
	f.Fuzz(func(t *testing.T, origin string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Origin", origin)
		if !n.OriginOK(r) {
			return
		}
		u, err := url.Parse(origin)
		if err != nil || !n.hosts[HostPort(u.Hostname(), u.Port())] {
			t.Fatalf("accepted origin %q, which does not name the server", origin)
		}
	})
}
