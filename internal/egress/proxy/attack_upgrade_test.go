package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Attack: a host answers 101 Switching Protocols that nobody asked for, then sends bytes
// that read as the answer to the client's next request (a desync). The proxy supports no
// upgrade: it refuses the 101 with a sentence and ends the connection, so nothing after it
// is relayed as an unaudited raw tunnel or a smuggled answer.
func TestAttack_UnrequestedSwitchingProtocols(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nSMUGGLE")
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	c := dialProxy(t, f.url.Host)
	br := bufio.NewReader(c)
	req := "GET http://127.0.0.1:" + port + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n\r\n"
	resp, body := sendOn(t, c, br, req)
	if resp.StatusCode != 502 || !strings.Contains(body, "101") {
		t.Fatalf("an unrequested 101 = %d %q, want a 502 sentence naming it", resp.StatusCode, body)
	}
	io.WriteString(c, req)
	if resp2, err := http.ReadResponse(br, nil); err == nil {
		b, _ := io.ReadAll(resp2.Body)
		t.Fatalf("the connection went on after the 101: %d %q", resp2.StatusCode, b)
	}
}

// A client's upgrade request (websocket, h2c) is refused with a sentence, never relayed.
func TestAttack_ClientUpgradeRefused(t *testing.T) {
	port, hits := rawServer(t, func(c net.Conn) { io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n") })
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	for _, h := range []string{"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: x\r\n", "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"} {
		resp, body := rawExchange(t, f.url.Host, "GET http://127.0.0.1:"+port+"/ HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n"+h+"\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "upgrades are not supported") {
			t.Fatalf("%q = %d %q", h, resp.StatusCode, body)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("an upgrade request reached the host")
	}
}

// Interim answers (102, 103 Early Hints) are skipped, and their headers never relayed.
func TestAttack_InterimResponsesSkipped(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nX-Hint: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	resp, body := rawExchange(t, f.url.Host, "GET http://127.0.0.1:"+port+"/ HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Hint") != "" {
		t.Fatalf("= %d %q %v", resp.StatusCode, body, resp.Header)
	}
}
