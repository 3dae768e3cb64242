package web_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// initHome is an AGORA_HOME made by `agora init` and the environment serve is started with:
// no token unless the test gives one.
func initHome(t *testing.T) (home string, env []string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	env = []string{"AGORA_HOME=" + home, "HOME=" + filepath.Dir(home), "PATH=" + os.Getenv("PATH")}
	cmd := exec.Command(agoraBin, "init")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agora init: %v\n%s", err, out)
	}
	return home, env
}

// TestRedTeam48_ServeWebRefusesToStart runs the real `agora orch serve --http`: the web view
// reads its token, bind and opt-in by the rules agora mcp --http does (internal/cli/httpauth),
// and each refusal exits 2 before serve opens anything, printing no token.
func TestRedTeam48_ServeWebRefusesToStart(t *testing.T) {
	home, env := initHome(t)
	good := strings.Repeat("5e", 32)
	short := "0123456789abcdef0123456789abcde"
	long := strings.Repeat("q", 513)
	open := filepath.Join(t.TempDir(), "open.yaml")
	must(t, os.WriteFile(open, []byte("- {name: a, token: "+good+", ceiling: read}\n"), 0o644))
	for _, tt := range []struct {
		name string
		env  []string
		addr string
		want string
	}{
		{"no token", nil, "127.0.0.1:0", "no token, no bind"},
		{"an empty token", []string{"AGORA_HTTP_TOKEN="}, "127.0.0.1:0", "no token, no bind"},
		{"short token", []string{"AGORA_HTTP_TOKEN=" + short}, "127.0.0.1:0", "at least 32 are required"},
		{"over-long token", []string{"AGORA_HTTP_TOKEN=" + long}, "127.0.0.1:0", "at most 512 are allowed"},
		{"every interface without the opt-in", []string{"AGORA_HTTP_TOKEN=" + good}, "0.0.0.0:0", "AGORA_HTTP_ALLOW_ANY=yes-i-understand-the-risk"},
		{"an empty host without the opt-in", []string{"AGORA_HTTP_TOKEN=" + good}, ":0", "every interface is not 127.0.0.1"},
		{"an opt-in that is not the literal", []string{"AGORA_HTTP_TOKEN=" + good, "AGORA_HTTP_ALLOW_ANY=yes"}, "0.0.0.0:0", "must be exactly yes-i-understand-the-risk"},
		{"both token variables", []string{"AGORA_HTTP_TOKEN=" + good, "AGORA_HTTP_TOKENS_FILE=" + open}, "127.0.0.1:0", "use one"},
		{"tokens file others can read", []string{"AGORA_HTTP_TOKENS_FILE=" + open}, "127.0.0.1:0", "readable or writable by others"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(agoraBin, "orch", "serve", "--http", tt.addr)
			cmd.Env = append(append([]string{}, env...), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out)
			}
			for _, tok := range []string{good, short, long[:64]} {
				if strings.Contains(string(out), tok) {
					t.Errorf("output echoes a token:\n%s", out)
				}
			}
			if strings.Contains(string(out), "web run view on") || strings.Contains(string(out), "orchestrator serving") {
				t.Errorf("serve started:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(home, "orch", "orch.sock")); err == nil {
				t.Errorf("serve opened its socket before refusing")
			}
		})
	}
}

// serveWeb starts `agora orch serve --http 127.0.0.1:PORT` with env and returns the web view's
// address once serve says it listens, and serve's output so far; serve is stopped when t ends.
func serveWeb(t *testing.T, env []string) (addr string, output func() string) {
	t.Helper()
	cmd := exec.Command(agoraBin, "orch", "serve", "--http", agoratest.FreeAddr(t))
	cmd.Env = env
	pipe, err := cmd.StderrPipe()
	must(t, err)
	cmd.Stdout = io.Discard
	must(t, cmd.Start())
	var mu sync.Mutex
	var out strings.Builder
	output = func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if a, ok := strings.CutPrefix(sc.Text(), "agora: web run view on http://"); ok {
				select {
				case found <- a:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); <-done; cmd.Wait() })
	select {
	case addr = <-found:
	case <-done:
		t.Fatalf("serve exited before its web view listened:\n%s", output())
	}
	return addr, output
}

// TestRedTeam48_ServeWebAttacks attacks the real web view as a hostile browser page or
// program would, with AGORA_HTTP_TOKEN as its operator's token: every credential that is not
// exactly the token (in the query string included) is 401, the token itself as a session
// cookie is no session, and a Host or Origin that does not name the server is 403 even with
// the token. Nothing answered or logged carries the token.
func TestRedTeam48_ServeWebAttacks(t *testing.T) {
	_, env := initHome(t)
	token := strings.Repeat("c3", 32)
	addr, output := serveWeb(t, append(env, "AGORA_HTTP_TOKEN="+token))
	_, port, err := net.SplitHostPort(addr)
	must(t, err)
	bearer := "Bearer " + token
	for _, tt := range []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		{"no credential", "GET", "/api/runs", nil, http.StatusUnauthorized},
		{"empty bearer", "GET", "/api/runs", map[string]string{"Authorization": "Bearer "}, http.StatusUnauthorized},
		{"wrong token", "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + strings.Repeat("d4", 32)}, http.StatusUnauthorized},
		{"the token's first half", "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + token[:32]}, http.StatusUnauthorized},
		{"the token and more", "GET", "/api/runs", map[string]string{"Authorization": bearer + "0"}, http.StatusUnauthorized},
		{"the token behind a prefix", "GET", "/api/runs", map[string]string{"Authorization": "Bearer x" + token}, http.StatusUnauthorized},
		{"the token as Basic", "GET", "/api/runs", map[string]string{"Authorization": "Basic " + token}, http.StatusUnauthorized},
		{"over-long token", "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + strings.Repeat(token, 64)}, http.StatusUnauthorized},
		{"access_token in the query", "GET", "/api/runs?access_token=" + url.QueryEscape(token), nil, http.StatusUnauthorized},
		{"token in the query", "GET", "/api/runs?token=" + url.QueryEscape(token), nil, http.StatusUnauthorized},
		{"the token as the session cookie", "GET", "/api/runs", map[string]string{"Cookie": "agora_session=" + token}, http.StatusUnauthorized},
		{"rebound Host", "GET", "/api/runs", map[string]string{"Authorization": bearer, "Host": "evil.example:" + port}, http.StatusForbidden},
		{"rebound Host, loopback's name inside", "GET", "/api/runs", map[string]string{"Authorization": bearer, "Host": "localhost.evil.example:" + port}, http.StatusForbidden},
		{"rebound Host on the login page", "GET", "/login", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
		{"foreign Origin on an action", "POST", "/runs/r1/cancel", map[string]string{"Authorization": bearer, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"null Origin on an action", "POST", "/runs/r1/cancel", map[string]string{"Authorization": bearer, "Origin": "null"}, http.StatusForbidden},
		{"the token", "GET", "/api/runs", map[string]string{"Authorization": bearer}, http.StatusOK},
		{"the token by the bound Host's other name", "GET", "/api/runs", map[string]string{"Authorization": bearer, "Host": "localhost:" + port}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, nil)
			must(t, err)
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			must(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: got %d (%s), want %d", tt.method, tt.path, resp.StatusCode, strings.TrimSpace(string(body)), tt.want)
			}
			if strings.Contains(string(body), token[:16]) {
				t.Errorf("the answer echoes the token: %q", body)
			}
		})
	}
	if strings.Contains(output(), token[:16]) {
		t.Errorf("serve's output holds the token:\n%s", output())
	}
}
