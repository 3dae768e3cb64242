package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/host"
)

// agoraBin is the real agora binary, built once: the tests talk to it as a client would.
var agoraBin string

func TestMain(m *testing.M) {
	if answer := os.Getenv(sdkOnlyEnv); answer != "" { // a bench's bare SDK server process
		os.Exit(serveSDKOnly(answer))
	}
	// Every server, session and connection a test started must be gone.
	os.Exit(agoratest.NoLeaks(agoratest.RunWithBinary(m, &agoraBin)))
}

// secretCanary is the env bundle's secret value in every test home: it must never come back.
const secretCanary = "canary-5f3e9a1c7b2d4e6f-secret"

// newHome returns an AGORA_HOME with the test catalog applied through the real CLI.
func newHome(t testing.TB) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	// A dispatch's disk quota is unmounted after its record ends (by its supervisor, or by
	// the Reap of a later command when a test killed the supervisor): the home's removal
	// waits for that, after one last command has reaped.
	unmountedAtCleanup(t, home)
	t.Cleanup(func() {
		if _, err := os.Stat(home); err == nil {
			c := exec.Command(agoraBin, "dispatch", "list", "--limit", "1")
			c.Env = baseEnv(home)
			c.Run()
		}
	})
	src, err := filepath.Abs("testdata/catalog/agora-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	agora(t, home, nil, "init")
	agora(t, home, []string{"DEMO_TOKEN=" + secretCanary}, "apply", "-f", src)
	return home
}

// agora runs the binary with AGORA_HOME=home and returns its stdout.
func agora(t testing.TB, home string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = append(baseEnv(home), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func baseEnv(home string) []string {
	return []string{"AGORA_HOME=" + home, "HOME=" + filepath.Dir(home), "PATH=" + os.Getenv("PATH")}
}

// auditEntries returns the audit log's entries of kinds mcp.*.
func auditEntries(t testing.TB, home string) []auditEntry {
	t.Helper()
	var out []auditEntry
	if err := json.Unmarshal(agora(t, home, nil, "audit", "log", "--kind", "mcp.*", "-o", "json"), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type auditEntry struct {
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "agora-test", Version: "v0"}, nil)
}

// stdioSession starts `agora mcp ARGS` as a client would and connects to it over stdio.
func stdioSession(t testing.TB, home string, args ...string) *mcp.ClientSession {
	t.Helper()
	return stdioSessionEnv(t, home, nil, args...)
}

// server is a running `agora mcp --http` process.
type server struct {
	pid    int
	url    string // http://HOST:PORT/mcp
	addr   string // HOST:PORT
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// httpServer starts `agora mcp --http 127.0.0.1:0 ARGS` with env and waits until it listens.
func httpServer(t testing.TB, home string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(agoraBin, append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	return startServer(t, cmd, append(baseEnv(home), env...))
}

// startServer starts cmd with env and waits until it says where it listens, as
// `agora mcp --http` does on stderr; the server is interrupted when t ends.
func startServer(t testing.TB, cmd *exec.Cmd, env []string) *server {
	t.Helper()
	cmd.Env = env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &server{pid: cmd.Process.Pid}
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			srv.mu.Lock()
			srv.stderr.Write(sc.Bytes())
			srv.stderr.WriteByte('\n')
			srv.mu.Unlock()
			var line struct{ Msg, Addr string }
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "mcp server listening" {
				addr <- line.Addr
				sent = true
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-done
		cmd.Wait()
	})
	select {
	case srv.addr = <-addr:
	case <-done:
		t.Fatalf("%s exited before listening:\n%s", cmd.Args, srv.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30s:\n%s", cmd.Args, srv.logs())
	}
	srv.url = "http://" + srv.addr + "/mcp"
	return srv
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpSession connects an SDK client to url with token.
func httpSession(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	return httpSessionVia(t, url, token, http.DefaultTransport, nil)
}

// httpSessionVia is httpSession sending its requests through next, with opts (nil: the SDK's
// defaults, its newest protocol version among them).
func httpSessionVia(t testing.TB, url, token string, next http.RoundTripper, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token, next: next}}
	cs, err := newClient().Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true,
	}, opts)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func newToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := make([]string, len(res.Tools))
	for i, tl := range res.Tools {
		names[i] = tl.Name
	}
	return names
}

// call calls a tool and returns its result (IsError is the caller's to check).
func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// text returns a result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// decode unmarshals a successful result's structured content into v.
func decode(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// stdioSessionEnv is stdioSession with env added to the server's environment.
func stdioSessionEnv(t testing.TB, home string, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(agoraBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(baseEnv(home), env...)
	cmd.Stderr = io.Discard
	cs, err := newClient().Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to agora mcp over stdio: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// unmountedAtCleanup registers a cleanup, run before those registered earlier (the home's
// TempDir removal), that waits up to a minute until nothing is mounted at or under dir, and
// fails naming what stays mounted.
func unmountedAtCleanup(t testing.TB, dir string) {
	t.Helper()
	t.Cleanup(func() {
		var left []string
		ok := agoratest.Poll(time.Minute, func() bool {
			var err error
			left, err = host.MountsUnder(dir)
			return err == nil && len(left) == 0
		})
		if !ok {
			t.Errorf("still mounted under %s a minute after the test: %s", dir, strings.Join(left, ", "))
		}
	})
}
