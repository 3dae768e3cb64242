package cli

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGatewayListener_Inherited: with ListenFDEnv, the gateway serves on the socket its parent
// bound (the port held from the parent's choice on), and closes the inherited descriptor.
func TestGatewayListener_Inherited(t *testing.T) {
	parent, fd := inheritedListener(t)
	addr := parent.Addr().String()
	ln, err := gatewayListener(envOf(ListenFDEnv, strconv.Itoa(fd)), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	parent.Close() // the gateway's copy alone holds the port now
	if ln.Addr().String() != addr {
		t.Errorf("listens on %s, want %s", ln.Addr(), addr)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Errorf("descriptor %d is still open: a process the gateway starts would inherit it", fd)
	}
	if _, err := net.Listen("tcp", addr); err == nil {
		t.Errorf("%s could be bound again while the gateway holds it", addr)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b := make([]byte, 2); func() bool { _, err := c.Read(b); return err != nil || string(b) != "ok" }() {
		t.Error("the inherited socket does not serve")
	}
}

// TestGatewayListener_InheritedAnyAddress: a socket on every address of a port matches a
// --listen that names that port alone or the any address, and not one naming a single host.
func TestGatewayListener_InheritedAnyAddress(t *testing.T) {
	for _, c := range []struct {
		listen string // "%d": the socket's port
		ok     bool
	}{{":%d", true}, {"0.0.0.0:%d", true}, {"[::]:%d", true}, {"127.0.0.1:%d", false}} {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := dupFD(f)
		f.Close()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		listen := fmt.Sprintf(c.listen, ln.Addr().(*net.TCPAddr).Port)
		got, err := gatewayListener(envOf(ListenFDEnv, strconv.Itoa(fd)), listen)
		if (err == nil) != c.ok {
			t.Errorf("a socket on %s for --listen %s: %v, want accepted %v", ln.Addr(), listen, err, c.ok)
		}
		if got != nil {
			got.Close()
		}
	}
}

// TestGatewayListener_InheritedRefused: a descriptor that is not a listening socket, one on
// another address than --listen, and a value that names no descriptor are refused, saying
// why; a refused descriptor is closed all the same.
func TestGatewayListener_InheritedRefused(t *testing.T) {
	other, fd := inheritedListener(t)
	defer other.Close()
	const elsewhere = "127.0.0.1:1" // any address but the socket's: nothing is bound for the check
	if _, err := gatewayListener(envOf(ListenFDEnv, strconv.Itoa(fd)), elsewhere); err == nil ||
		!strings.Contains(err.Error(), "not on --listen "+elsewhere) {
		t.Errorf("a socket on %s for --listen %s: %v", other.Addr(), elsewhere, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Errorf("descriptor %d is still open after the refusal", fd)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "not-a-socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	dup, err := dupFD(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gatewayListener(envOf(ListenFDEnv, strconv.Itoa(dup)), elsewhere); err == nil ||
		!strings.Contains(err.Error(), "not a listening socket") {
		t.Errorf("a regular file's descriptor: %v", err)
	}
	for _, bad := range []string{"x", "-1", "0", "2"} {
		if _, err := gatewayListener(envOf(ListenFDEnv, bad), elsewhere); err == nil ||
			!strings.Contains(err.Error(), "want the number of an inherited descriptor") {
			t.Errorf("%s=%q: %v", ListenFDEnv, bad, err)
		}
	}
}

// TestGatewayListener_TLSOverInherited runs the whole gateway (agora gateway serve) on an
// inherited socket: it answers TLS 1.3 on the parent's port.
func TestGatewayListener_TLSOverInherited(t *testing.T) {
	parent, fd := inheritedListener(t)
	addr := parent.Addr().String()
	dir, errOut, done, cancel := startGatewayServe(t, envOf(ListenFDEnv, strconv.Itoa(fd)), addr)
	parent.Close()
	defer func() { cancel(); <-done }()
	if !strings.Contains(errOut.String(), "serving on "+addr) {
		t.Errorf("the gateway says %q, want it serving on %s", errOut.String(), addr)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: caPool(t, dir), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to the gateway on the inherited socket: %v", err)
	}
	conn.Close()
}

// inheritedListener is a listener on a free loopback port and a descriptor of its socket of
// the test's own, as a parent hands it over.
func inheritedListener(t *testing.T) (*net.TCPListener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := ln.(*net.TCPListener)
	f, err := tl.File()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := dupFD(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return tl, fd
}

// envOf is a getenv that knows key alone.
func envOf(key, value string) func(string) string {
	return func(k string) string {
		if k == key {
			return value
		}
		return ""
	}
}

// dupFD is a descriptor of f's of the caller's own, as an inherited one is.
func dupFD(f *os.File) (int, error) { return unix.Dup(int(f.Fd())) }
