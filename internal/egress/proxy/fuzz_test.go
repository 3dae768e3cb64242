package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
)

// FuzzServeConn feeds arbitrary client bytes to the proxy, whose grant names hosts the fake
// resolver maps to a refused address and whose dialer therefore reaches nothing. It must never
// panic, always answer with a parseable response or close, and never record an allowed
// connection.
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n",
		"GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\nGET http://b.test/ HTTP/1.1\r\n\r\n",
		"POST http://a.test/repos/acme/../x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		"GET http://a.test/%2e%2e/ HTTP/1.1\r\nAuthorization: Basic !!!\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"GET /relative HTTP/1.1\r\n\r\n",
		"\x16\x03\x01\x00\x05hello",
		"CONNECT a.test:99999 HTTP/1.1\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nProxy-Authorization: Basic YWdvcmE6eA==\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := &memAudit{}
		rules := []grant.EgressRule{{Host: "a.test"}, {Host: "*.b.test", Port: 443}, {Host: "a.test", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}
		p, err := New(Config{
			Rules:    rules,
			Dialer:   egress.NewDialer(egress.Policy{}, resolver{"a.test": "10.0.0.1", "x.b.test": "192.168.0.1"}),
			Audit:    a,
			Bindings: []Binding{{Key: "K", Placeholder: "agora-placeholder-x", Value: []byte("secret-value-x"), Hosts: []string{"a.test"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		client, server := socketPair(t)
		done := make(chan struct{})
		go func() {
			p.serveConn(server)
			server.Close()
			close(done)
		}()
		go func() {
			client.SetWriteDeadline(time.Now().Add(2 * time.Second))
			client.Write(data)
			client.CloseWrite()
		}()
		client.SetReadDeadline(time.Now().Add(2 * time.Second))
		br := bufio.NewReader(client)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode == 200 {
				t.Fatalf("a connection was allowed: %q", data)
			}
		}
		client.Close()
		<-done
		p.Close()
		if len(a.find(KindConnect, "allow")) > 0 {
			t.Fatalf("allowed entry for %q:\n%s", data, a.dump())
		}
	})
}

// socketPair is a connected pair of Unix stream sockets: unlike net.Pipe, a side can
// half-close, so the proxy sees the end of the client's bytes.
func socketPair(t *testing.T) (*net.UnixConn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]).(*net.UnixConn), conn(fds[1])
}
