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
