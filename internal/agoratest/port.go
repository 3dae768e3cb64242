package agoratest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr is a loopback address ("127.0.0.1:PORT") nothing listens on now, for a program the
// test starts to listen there. See [FreePort].
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	port, err := FreePort("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// FreePort is a port of host nothing listens on now. It is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port from that range, as a listen on port 0 hands out, is
// also what any outgoing connection on the machine may take as its own, and the packages'
// tests run at once, so between this check and the program's bind another test's connection
// or listener could take it ("address already in use"). Below the range only another
// explicit bind can, and the port is drawn at random.
//
// It is never a port browsers refuse to load (browserRefuses): a test that opens the program's
// pages in Chromium would fail with net::ERR_UNSAFE_PORT.
func FreePort(host string) (string, error) {
	low := ephemeralLow()
	return freePort(host, low, func() int { return 10000 + rand.IntN(low-10000) })
}

// browserRefuses says whether Chromium and Firefox refuse to load pages from port: the one
// in the range FreePort draws from that their restricted lists hold (NAT slipstreaming).
func browserRefuses(port int) bool { return port == 10080 }

// freePort is FreePort with the ports to try drawn by draw.
func freePort(host string, low int, draw func() int) (string, error) {
	for range 200 {
		n := draw()
		if browserRefuses(n) {
			continue
		}
		port := strconv.Itoa(n)
		if l, err := net.Listen("tcp", net.JoinHostPort(host, port)); err == nil {
			l.Close()
			return port, nil
		}
	}
	return "", fmt.Errorf("no free port on %s below %d after 200 tries", host, low)
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 11000 {
		return 32768
	}
	return n
}
