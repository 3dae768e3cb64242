package modelgw

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/grant"
)

func testConfig() Config {
	return Config{DispatchID: testDispatchID, Role: testRole, Dialer: loopbackDialer(), Audit: &fakeAuditor{}}
}

func TestListen_SocketMode(t *testing.T) {
	h := start(t, Config{})
	fi, err := os.Lstat(h.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("got socket mode %v, want a socket with mode 0600", fi.Mode())
	}
	entries, err := os.ReadDir(filepath.Dir(h.sock))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("got %d entries beside the socket, want only the socket (temporary directory left behind?)", len(entries))
	}
}

func TestGateway_CloseRemovesSocket(t *testing.T) {
	sock := filepath.Join(shortDir(t), "gw.sock")
	gw, err := Listen(t.Context(), sock, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after close: lstat socket: %v, want it gone", err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("dial after close succeeded")
	}
	if err := gw.Close(); err != nil {
		t.Errorf("second close: %v, want nil", err)
	}
}

func TestGateway_ContextCancelCloses(t *testing.T) {
	sock := filepath.Join(shortDir(t), "gw.sock")
	ctx, cancel := context.WithCancel(t.Context())
	gw, err := Listen(ctx, sock, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Lstat(sock); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket still there 5s after the context was cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := gw.Close(); err != nil {
		t.Errorf("close after cancel: %v", err)
	}
}

func TestListen_ExistingPath(t *testing.T) {
	t.Run("StaleSocketReplaced", func(t *testing.T) {
		sock := filepath.Join(shortDir(t), "gw.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		gw, err := Listen(t.Context(), sock, testConfig())
		if err != nil {
			t.Fatalf("listen over a stale socket: %v", err)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Errorf("dial the new gateway: %v", err)
		} else {
			conn.Close()
		}
		if err := gw.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Run("LiveSocketRefused", func(t *testing.T) {
		sock := filepath.Join(shortDir(t), "gw.sock")
		first, err := Listen(t.Context(), sock, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		if _, err := Listen(t.Context(), sock, testConfig()); err == nil || !strings.Contains(err.Error(), "another process is listening") {
			t.Errorf("listen over a live socket: got %v, want a refusal", err)
		}
		if _, err := os.Lstat(sock); err != nil {
			t.Errorf("the live socket was disturbed: %v", err)
		}
	})
	t.Run("RegularFileRefused", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "gw.sock")
		if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(t.Context(), path, testConfig()); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("listen over a file: got %v, want a refusal", err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
			t.Errorf("the file was changed: %q %v", b, err)
		}
	})
	t.Run("PathTooLong", func(t *testing.T) {
		path := filepath.Join(shortDir(t), strings.Repeat("s", 110))
		if _, err := Listen(t.Context(), path, testConfig()); err == nil || !strings.Contains(err.Error(), "byte limit of a Unix socket") {
			t.Errorf("got %v, want a path length refusal", err)
		}
	})
}

func TestListen_ConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		msg    string
	}{
		{"NoDialer", func(c *Config) { c.Dialer = nil }, "no dialer"},
		{"NoAuditor", func(c *Config) { c.Audit = nil }, "no auditor"},
		{"NoDispatchID", func(c *Config) { c.DispatchID = "" }, "dispatch id"},
		{"DispatchIDWithNewline", func(c *Config) { c.DispatchID = "a\nb" }, "dispatch id"},
		{"RoleWithoutHash", func(c *Config) { c.Role = "reviewer" }, "role"},
		{"RoleShortHash", func(c *Config) { c.Role = "reviewer@sha256:abc" }, "role"},
		{"ShortKey", func(c *Config) { c.APIKey = []byte("sk-1234") }, "shorter than 8 bytes"},
		{"KeyWithNewline", func(c *Config) { c.APIKey = []byte(testKey + "\r\nX-Evil: 1") }, "not visible ASCII"},
		{"GrantNotLowercase", func(c *Config) { c.Egress = []grant.EgressRule{{Host: "Evil.com"}} }, "egress grant"},
		{"GrantBareWildcard", func(c *Config) { c.Egress = []grant.EgressRule{{Host: "*"}} }, "egress grant"},
		{"ModelUserinfo", func(c *Config) { c.ModelBaseURL = "https://user:pw@model.test/v1" }, "userinfo"},
		{"ModelQuery", func(c *Config) { c.ModelBaseURL = "https://model.test/v1?key=x" }, "query"},
		{"ModelScheme", func(c *Config) { c.ModelBaseURL = "ftp://model.test/v1" }, "not http or https"},
		{"ModelPrivateLiteral", func(c *Config) { c.ModelBaseURL = "http://10.1.1.1/v1" }, "address 10.1.1.1 is private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.change(&cfg)
			sock := filepath.Join(shortDir(t), "gw.sock")
			_, err := Listen(t.Context(), sock, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an error containing %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q repeats the key", err)
			}
			if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a socket was created for a refused config")
			}
		})
	}
}

// TestGateway_CloseWaitsForInFlight shows Close lets a running request finish.
func TestGateway_CloseWaitsForInFlight(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.Write([]byte(`{"done":true}`))
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test")})
	type result struct {
		status int
		body   string
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/model/chat/completions", strings.NewReader(`{"model":"m"}`))
		resp, err := h.client.Do(req)
		if err != nil {
			got <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			b = append(b, err.Error()...)
		}
		got <- result{resp.StatusCode, string(b)}
	}()
	<-arrived
	closed := make(chan error, 1)
	go func() { closed <- h.gw.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if r := <-got; r.status != http.StatusOK || r.body != `{"done":true}` {
		t.Errorf("in-flight request: got %d %q, want 200 and the full body", r.status, r.body)
	}
	if err := <-closed; err != nil {
		t.Errorf("close: %v", err)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionAllowed, http.StatusOK, "")
}

// TestGateway_CloseIsBounded shows Close cancels a request that outlives the grace period.
func TestGateway_CloseIsBounded(t *testing.T) {
	arrived := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // net/http notices a client going away only once the body is read
		close(arrived)
		<-r.Context().Done() // until the gateway gives up on it
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test")})
	h.gw.closeGrace = 50 * time.Millisecond
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/model/chat/completions", strings.NewReader(`{"model":"m"}`))
		resp, err := h.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	startClose := time.Now()
	if err := h.gw.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if d := time.Since(startClose); d > 5*time.Second {
		t.Errorf("close took %v, want it bounded by the grace period", d)
	}
	<-errc
	rec := h.audit.lastGateway(t, 1)
	if rec["decision"] == decisionAllowed {
		t.Errorf("got record %v, want the cancelled request recorded as not allowed", rec)
	}
}
