package httplisten

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestListen_CapsOpenConnections: with the cap reached, a further connection is not accepted
// until one closes; localhost binds the loopback address.
func TestListen_CapsOpenConnections(t *testing.T) {
	ln, err := Listen("localhost:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("localhost bound %v, want 127.0.0.1", ip)
	}
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted over the cap of 2")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close must not release a second slot
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	second.Close()
}

func TestListen_BadAddress(t *testing.T) {
	if _, err := Listen("no-port", 1); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// TestListen_IdleYieldsWhenFull: with every place held by idle keep-alive connections of a
// real http.Server, a new connection is accepted and answered, and the connection idle
// longest is the one closed (otherwise idle connections held without a token keep
// everyone out of the web view).
func TestListen_IdleYieldsWhenFull(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), ConnState: ConnState}
	go srv.Serve(ln)
	defer srv.Close()
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		time.Sleep(20 * time.Millisecond) // distinct idle times
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a new connection with every place held idle: %v", err)
	}
	resp.Body.Close()
	held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held[0].Read(make([]byte, 1)); err == nil {
		t.Error("the connection idle longest is still open")
	}
}
