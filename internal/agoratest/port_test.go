package agoratest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddr_BelowTheEphemeralRange: the address is loopback, free (a listen there works)
// and its port below the range a listen on port 0 draws from.
func TestFreeAddr_BelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr := FreeAddr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("FreeAddr = %q (%v), want 127.0.0.1:PORT", addr, err)
		}
		if n, _ := strconv.Atoi(port); n < 10000 || n >= low {
			t.Fatalf("FreeAddr's port %d, want in [10000, %d)", n, low)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on FreeAddr's %s: %v", addr, err)
		}
		l.Close()
	}
}

// TestFreePort_NeverAPortBrowsersRefuse: drawn first, 10080 (on Chromium's and Firefox's
// restricted lists) is passed over for the next port drawn.
func TestFreePort_NeverAPortBrowsersRefuse(t *testing.T) {
	ports := []int{10080, 10081}
	port, err := freePort("127.0.0.1", ephemeralLow(), func() int {
		p := ports[0]
		if len(ports) > 1 {
			ports = ports[1:]
		}
		return p
	})
	if err != nil {
		t.Skipf("SKIP: 127.0.0.1:10081 is in use here: %v", err)
	}
	if port != "10081" {
		t.Fatalf("freePort = %s, want 10081 (10080 passed over)", port)
	}
}
