package netgw

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A Unix peer is named by its uid, so the per-source caps count each docker slot (a uid of
// its own) apart: without PeerListener every peer of the slots' socket is one source, and one
// slot's agent filling its pending pool closed the other slots' workers' connections.
func TestPeerListener_SourceIsPeerUID(t *testing.T) {
	dir, err := os.MkdirTemp("", "agpeer")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	raw, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ln := PeerListener(raw)
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", filepath.Join(dir, "s"))
		if err == nil {
			defer c.Close()
			b := make([]byte, 1)
			c.Read(b)
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "uid-" + strconv.Itoa(os.Geteuid())
	if got := sourceOf(c.RemoteAddr()); got != want {
		t.Fatalf("source %q, want %q", got, want)
	}

	// Two uids' pending connections are two pools: the second's does not evict the first's.
	tb := (&Server{MaxPendingPerSource: 1, MaxPending: 8}).newConnTable()
	a := tb.admit(peerConn{Conn: nopConn{}, addr: "uid-1001"})
	b := tb.admit(peerConn{Conn: nopConn{}, addr: "uid-1002"})
	if a == nil || b == nil {
		t.Fatal("admit refused")
	}
	if evicted(tb, a) {
		t.Fatal("another uid's connection evicted the first uid's: the sources are not apart")
	}
	// The same uid's second one does evict: the cap is per uid.
	tb.admit(peerConn{Conn: nopConn{}, addr: "uid-1001"})
	if !evicted(tb, a) {
		t.Fatal("a second pending connection of one uid over its cap of 1 did not evict its first")
	}
}

// evicted says whether gc was closed to make room.
func evicted(t *connTable, gc *gateConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return gc.expired
}

// nopConn is a connection that does nothing: for the table's bookkeeping alone.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
