package claudeadapter

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// unixRecorder is an HTTP server on a Unix socket that records what reaches it.
type unixRecorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func startUnixRecorder(t *testing.T) (*unixRecorder, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	u := &unixRecorder{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(context.Background()))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_stop\ndata: {}\n\n")
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return u, sock
}

// TestRelay: the loopback relay forwards only /anthropic/ requests that carry its token,
// with only the API headers, no query and no token, to the gateway's socket.
func TestRelay(t *testing.T) {
	rec, sock := startUnixRecorder(t)
	gw := agentrun.DialGateway(sock)
	defer gw.Close()
	tok, err := agentrun.NewRelayToken()
	if err != nil {
		t.Fatal(err)
	}
	rl, err := startRelay(gw, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	if !strings.HasPrefix(rl.URL, "http://127.0.0.1:") || !strings.HasSuffix(rl.URL, "/anthropic") {
		t.Fatalf("relay URL %q", rl.URL)
	}
	post := func(path string, hdr http.Header) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, strings.TrimSuffix(rl.URL, "/anthropic")+path, strings.NewReader(`{}`))
		req.Header = hdr
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := http.Header{
		"Authorization":     {"Bearer " + rl.Token},
		"Content-Type":      {"application/json"},
		"Anthropic-Version": {"2023-06-01"},
		"Cookie":            {"a=b"},
		"X-Forwarded-For":   {"10.0.0.1"},
	}
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
		status     int
	}{
		{"NoToken", "/anthropic/v1/messages", http.Header{"Content-Type": {"application/json"}}, http.StatusUnauthorized},
		{"WrongToken", "/anthropic/v1/messages", http.Header{"Authorization": {"Bearer agora-relay-00"}}, http.StatusUnauthorized},
		{"OtherPath", "/fetch", good, http.StatusNotFound},
		{"AuditPath", "/audit/tool", good, http.StatusNotFound},
		{"Forwarded", "/anthropic/v1/messages?beta=true", good, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.reqs)
			status, body := post(tc.path, tc.hdr)
			if status != tc.status {
				t.Fatalf("got %d %q, want %d", status, body, tc.status)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if tc.status != http.StatusOK {
				if len(rec.reqs) != before {
					t.Error("a refused request reached the gateway")
				}
				return
			}
			if !strings.Contains(body, "message_stop") {
				t.Errorf("body %q, want the gateway's stream", body)
			}
			got := rec.reqs[len(rec.reqs)-1]
			if got.URL.Path != "/anthropic/v1/messages" || got.URL.RawQuery != "" {
				t.Errorf("gateway got %s?%s, want the path without the query", got.URL.Path, got.URL.RawQuery)
			}
			for _, h := range []string{"Authorization", "Cookie", "X-Forwarded-For"} {
				if v := got.Header.Get(h); v != "" {
					t.Errorf("gateway got %s %q, want it dropped", h, v)
				}
			}
			if got.Header.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("gateway got anthropic-version %q", got.Header.Get("Anthropic-Version"))
			}
		})
	}
}
