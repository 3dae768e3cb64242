package proxy

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	stdpath "path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
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
		// The attack tests' requests (attack_*_test.go): encodings, overrides, upgrades, heads.
		"GET http://a.test/repos/acme/%252e%252e/x HTTP/1.1\r\n\r\n",
		"GET http://a.test/repos/acme/..;/x HTTP/1.1\r\n\r\n",
		"GET http://a.test/repos/acmeevil HTTP/1.1\r\n\r\n",
		"GET http://a.test/repos/acme/x HTTP/1.1\r\nX-HTTP-Method-Override: DELETE\r\n\r\n",
		"POST http://a.test/repos/acme/x?_method=DELETE HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nX-Auth: YWdvcmEtcGxhY2Vob2xkZXIteA==\r\n\r\n",
		"GET http://a.test/?t=%2561gora-placeholder-x HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
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
		if len(a.find(entry.NetConnect, "allow")) > 0 {
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

// FuzzRequestPath: whatever request target the sandbox sends, a path the proxy lets through
// a path rule stays under the prefix however a server reads it (decoded once more, "\\" as
// "/", ";parameters" cut, dot segments resolved), and the path sent upstream is the one
// checked.
func FuzzRequestPath(f *testing.F) {
	for _, s := range []string{
		"/repos/acme/x", "/repos/acme/../x", "/repos/acme/%2e%2e/x", "/repos/acme/%252e%252e/x",
		"/repos/acme/..;/x", "/repos/acme%2fx", "/repos/acme/a\\..\\..\\x", "/repos/betaevil",
		"/repos/beta;x/../../y", "/repos/acme/x#/../..", "http://a.test/repos/acme/x", "/repos/acme/%c0%ae%c0%ae/x",
	} {
		f.Add(s)
	}
	rule := grant.EgressRule{Host: "a.test", Paths: []string{"/repos/acme/", "/repos/beta"}}
	p, err := New(Config{Rules: []grant.EgressRule{rule}, Dialer: egress.NewDialer(egress.Policy{}, nil), Audit: &memAudit{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, target string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: a.test\r\n\r\n")))
		if err != nil {
			return
		}
		s := p.newSession(target0, decision{allowed: true, inspect: true}, false, nil)
		if s.check(req) != "" {
			return
		}
		path := req.URL.Path
		for _, read := range serverReadings(path) {
			if !underSome(read, rule.Paths) {
				t.Fatalf("%q passed as %q, which a server may read as %q, outside %q", target, path, read, rule.Paths)
			}
		}
		out := outgoing(req, target0, false, false)
		sent, err := url.ParseRequestURI(out.URL.RequestURI())
		if err != nil || sent.Path != path {
			t.Fatalf("%q: checked %q, sent %q (%v)", target, path, out.URL.RequestURI(), err)
		}
	})
}

var target0 = target{host: "a.test", port: 80}

// serverReadings are the ways servers are known to read a decoded path.
func serverReadings(p string) []string {
	out := []string{p}
	if d, err := url.PathUnescape(p); err == nil {
		out = append(out, d)
	}
	out = append(out, strings.ReplaceAll(p, "\\", "/"))
	var segs []string
	for _, seg := range strings.Split(p, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		segs = append(segs, seg)
	}
	out = append(out, strings.Join(segs, "/"))
	for i, r := range out {
		c := stdpath.Clean(r)
		if strings.HasSuffix(r, "/") && c != "/" {
			c += "/"
		}
		out[i] = c
	}
	return out
}

func underSome(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if grant.PathUnder(p, pre) || p+"/" == pre {
			return true
		}
	}
	return false
}

// FuzzPlaceholderFinder: the placeholder inside any bytes, encoded as a whole blob (base64
// either alphabet, hex, every byte percent-encoded, query-escaped twice), is always found;
// any input is judged without a panic.
func FuzzPlaceholderFinder(f *testing.F) {
	f.Add([]byte("user:"), []byte("&x=1"), uint8(0))
	f.Add([]byte(""), []byte(""), uint8(3))
	f.Add([]byte("\x00\xff%"), []byte("%zz"), uint8(5))
	const ph = "agora-placeholder-0123456789abcdef"
	fd := newPlaceholderFinder(ph)
	f.Fuzz(func(t *testing.T, pre, post []byte, enc uint8) {
		fd.in(string(pre) + string(post))
		blob := string(pre) + ph + string(post)
		var s string
		switch enc % 6 {
		case 0:
			s = blob
		case 1:
			s = base64.StdEncoding.EncodeToString([]byte(blob))
		case 2:
			s = base64.RawURLEncoding.EncodeToString([]byte(blob))
		case 3:
			s = hex.EncodeToString([]byte(blob))
		case 4:
			var b strings.Builder
			for i := range len(blob) {
				fmt.Fprintf(&b, "%%%02X", blob[i])
			}
			s = b.String()
		case 5:
			s = url.QueryEscape(url.QueryEscape(blob))
		}
		if !fd.in(s) {
			t.Fatalf("placeholder not found in encoding %d of %q: %q", enc%6, blob, s)
		}
	})
}
