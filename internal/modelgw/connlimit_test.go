package modelgw

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestLimitListener: two connections are accepted, a third waits until one of them is
// closed (closing it twice gives back one slot), and Close ends an Accept that waits.
func TestLimitListener(t *testing.T) {
	sock := filepath.Join(shortDir(t), "l.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2)
	defer l.Close()
	for range 3 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	third := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted with both slots held")
	default:
	}
	a.Close()
	a.Close() // a second Close gives back nothing more
	c := <-third
	if got := len(l.slots); got != 2 {
		t.Errorf("%d slots held after one of three connections closed, want 2", got)
	}
	b.Close()
	c.Close()
	if got := len(l.slots); got != 0 {
		t.Errorf("%d slots held after every connection closed, want 0", got)
	}
	// Close ends an Accept that waits for a slot.
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	x, _ := l.Accept()
	y, _ := l.Accept()
	defer x.Close()
	defer y.Close()
	done := make(chan error)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: got %v, want net.ErrClosed", err)
	}
}

// TestGateway_IdleConnectionsClosed: a connection that stays idle after its answer, or that
// never finishes its request's header, is closed by the gateway (after idleTimeout and
// readHeaderTimeout, a few seconds), so it cannot hold one of the maxConns slots for long.
func TestGateway_IdleConnectionsClosed(t *testing.T) {
	if idleTimeout > 10*time.Second || readHeaderTimeout > 10*time.Second {
		t.Errorf("idle timeout %v, header timeout %v: want a few seconds", idleTimeout, readHeaderTimeout)
	}
	h := start(t, Config{})
	cases := []struct{ name, send string }{
		{"Idle", "GET /nope HTTP/1.1\r\nHost: g\r\n\r\n"},
		{"SlowHeader", "GET /nope HTTP/1.1\r\nHost: g\r\n"},
		{"Silent", ""},
	}
	// All at once, so the test waits for the timeouts once.
	conns := make([]net.Conn, len(cases))
	for i, tc := range cases {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, tc.send); err != nil {
			t.Fatal(err)
		}
		// A guard, not a measure: the gateway closes it long before.
		c.SetReadDeadline(time.Now().Add(time.Minute))
		conns[i] = c
	}
	for i, tc := range cases {
		r := bufio.NewReader(conns[i])
		if tc.name == "Idle" {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if b, err := io.ReadAll(r); err != nil {
			t.Errorf("%s: the connection was not closed by the gateway: %v (read %q)", tc.name, err, b)
		}
	}
}
