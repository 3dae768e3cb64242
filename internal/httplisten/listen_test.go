package httplisten

import (
	"net"
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
