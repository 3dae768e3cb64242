package obs_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/obs"
)

// TestRedTeamWeb_MetricsOddHosts serves the metrics listener's own request path on a real
// socket, bound to loopback and to every interface, and sends Host and Origin values a
// rebinding page or a confused parser could: trailing dots, other spellings of 127.0.0.1,
// IPv6 forms, wrong or padded ports, userinfo, lists. None reads a series; the listener's
// own address is answered.
func TestRedTeamWeb_MetricsOddHosts(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "agora_series 1\n") })
	for _, bind := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		ln, err := net.Listen("tcp", bind)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: obs.ListenerHandler(obs.ListenerConfig{Addr: bind, Handlers: map[string]http.Handler{"GET /metrics": ok}}, ln.Addr())}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		addr := "127.0.0.1:" + port
		for _, h := range []string{
			"evil.example:" + port, "localhost.:" + port, "127.0.0.1.:" + port, "127.1:" + port, "2130706433:" + port,
			"0x7f000001:" + port, "0177.0.0.1:" + port, "[::ffff:127.0.0.1]:" + port, "127.0.0.1:0" + port,
			"127.0.0.1:" + port + "0", "localhost:" + port + "@evil.example", "evil.example@127.0.0.1:" + port,
			"127.0.0.1:" + port + ",evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port, "",
			"127.0.0.1", "0.0.0.0:" + port,
		} {
			if code, body := metricsRaw(t, addr, h, ""); code == http.StatusOK {
				t.Errorf("bind %s, Host %q: 200 %q", bind, h, body)
			}
		}
		for _, o := range []string{"http://127.0.0.1:" + port + ".evil.example", "http://localhost.:" + port, "http://127.1:" + port,
			"http://127.0.0.1", "null", "http://127.0.0.1:" + port + "@evil.example", "http://0.0.0.0:" + port} {
			if code, body := metricsRaw(t, addr, addr, o); code == http.StatusOK {
				t.Errorf("bind %s, Origin %q: 200 %q", bind, o, body)
			}
		}
		if code, body := metricsRaw(t, addr, addr, ""); code != http.StatusOK || !strings.Contains(body, "agora_series") {
			t.Errorf("bind %s, its own address: %d %q", bind, code, body)
		}
	}
}

func metricsRaw(t *testing.T, addr, host, origin string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /metrics HTTP/1.1\r\nHost: " + host + "\r\n"
	if origin != "" {
		req += "Origin: " + origin + "\r\n"
	}
	io.WriteString(conn, req+"Connection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
