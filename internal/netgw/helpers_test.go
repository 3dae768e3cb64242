package netgw

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// agoraBin is the real agora binary, built once by TestMain.
var agoraBin string

func TestMain(m *testing.M) {
	if os.Getenv(slotHolderEnv) != "" {
		os.Exit(slotHolderMain()) // a warm slot's holder, to be killed with -9 (slot_test.go)
	}
	if os.Getenv(haSupervisorEnv) != "" {
		os.Exit(haSupervisorMain()) // a supervisor that exported a session, killed with -9 (redteam_ha_test.go)
	}
	goleak.VerifyTestMain(binaryMain{m})
}

// binaryMain builds the binary around the package's tests, inside goleak's check.
type binaryMain struct{ m *testing.M }

func (b binaryMain) Run() int { return agoratest.RunWithBinary(b.m, &agoraBin) }

// gw is a real gateway on loopback TLS over a registry in a temp dir.
type gw struct {
	reg   *Registry
	srv   *Server
	url   string
	ca    []byte
	logs  *syncBuffer
	home  string
	close func()

	certs   *Certs
	version string
	set     func(*Server)
}

func startGateway(t testing.TB) *gw {
	t.Helper()
	return startGatewayVersion(t, workerVersion())
}

// startGatewayVersion starts a gateway that says the host runs agora version.
func startGatewayVersion(t testing.TB, version string) *gw {
	t.Helper()
	return startGatewayWith(t, version, nil)
}

// startGatewayWith starts a gateway whose Server set changes before it serves.
func startGatewayWith(t testing.TB, version string, set func(*Server)) *gw {
	t.Helper()
	home := t.TempDir()
	certs, err := LoadOrCreateCA(filepath.Join(home, "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	g := &gw{reg: &Registry{Dir: filepath.Join(home, "gateway", "sessions")}, ca: certs.CAPEM, logs: &syncBuffer{}, home: home,
		certs: certs, version: version, set: set}
	// Not port 0: [gw.away] and [gw.restart] bind this address again after g.close frees it,
	// and a port of the ephemeral range may be taken meanwhile by any test's port 0 or
	// outgoing connection. Below it only an explicit bind can, so a lost race is retried.
	var ln net.Listener
	for try := 0; ; try++ {
		if ln, err = net.Listen("tcp", agoratest.FreeAddr(t)); err == nil || try == 4 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	g.url = "https://" + ln.Addr().String()
	g.serve(t, ln)
	t.Cleanup(func() { g.close() })
	return g
}

// serve runs a fresh Server of g's settings on ln; g.close stops it (once).
func (g *gw) serve(t testing.TB, ln net.Listener) {
	g.srv = &Server{Registry: g.reg, Version: g.version, Log: slog.New(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if g.set != nil {
		g.set(g.srv)
	}
	g.srv.conns = g.srv.newConnTable() // before the goroutine, so tests read it race-free
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.srv.Serve(ctx, ln, g.certs.Server) }()
	var once sync.Once
	g.close = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && err != http.ErrServerClosed {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// away holds g's address after a stop (g.close) as a gateway on its way back up does: it takes
// each connection and closes it at once, counting them, so a test sees the pods try. back
// frees the address for [gw.restart].
func (g *gw) away(t testing.TB) (tries *atomic.Int64, back func()) {
	t.Helper()
	ln, err := net.Listen("tcp", strings.TrimPrefix(g.url, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	tries = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tries.Add(1)
			c.Close()
		}
	}()
	var once sync.Once
	back = func() { once.Do(func() { ln.Close(); <-done }) }
	t.Cleanup(back)
	return tries, back
}

// restart serves g again on its address after a stop (g.close), as a restarted `agora orch
// serve --gateway` does: a new process over the same sessions directory and CA.
func (g *gw) restart(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", strings.TrimPrefix(g.url, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	g.serve(t, ln)
}

func (g *gw) client(t testing.TB, id, token string) *workerremote.Client {
	t.Helper()
	c, err := workerremote.NewClient(g.url, id, token, g.ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// do sends a raw request with token ("" for none) and returns the status and body.
func (g *gw) do(t testing.TB, method, path, token string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// httpClient is a plain HTTPS client trusting the gateway's CA.
func (g *gw) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// layout is a dispatch's host side as the supervisor stages it.
type layout struct {
	id                              string
	bundle, workspace, out, gateway string
	manifest                        string // a file bind
	outside                         string // a secret file outside every bind
	stdout, stderr                  *syncBuffer
	secrets                         []byte
}

// stageLayout makes a stage with content in each bind, a symlink in the workspace pointing
// outside, and an echo server on gateway/echo.sock.
func stageLayout(t testing.TB, id string) *layout {
	t.Helper()
	dir := t.TempDir()
	l := &layout{id: id, bundle: filepath.Join(dir, "bundle"), workspace: filepath.Join(dir, "workspace"),
		out: filepath.Join(dir, "out"), gateway: filepath.Join(dir, "gw"), manifest: filepath.Join(dir, "manifest.json"),
		outside: filepath.Join(dir, "host-secret"), stdout: &syncBuffer{}, stderr: &syncBuffer{},
		secrets: []byte(`{"API_KEY":"s3cr3t-value"}`)}
	for _, d := range []string{l.bundle, filepath.Join(l.bundle, "capabilities"), l.workspace, filepath.Join(l.workspace, "src"), l.out, l.gateway} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(l.bundle, "subagent.json"), []byte(`{"name":"s"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(l.bundle, "capabilities", "c.tar"), bytes.Repeat([]byte("c"), 5000), 0o644))
	must(t, os.WriteFile(filepath.Join(l.workspace, "src", "main.go"), []byte("package main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(l.workspace, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("src/main.go", filepath.Join(l.workspace, "inlink")))
	must(t, os.WriteFile(l.outside, []byte("HOST-ONLY-CONTENT"), 0o600))
	must(t, os.Symlink(l.outside, filepath.Join(l.workspace, "outlink")))
	must(t, os.WriteFile(l.manifest, []byte(`{"version":1}`), 0o644))
	echo(t, filepath.Join(l.gateway, "echo.sock"))
	return l
}

func (l *layout) spec(t testing.TB) compute.Spec {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { wr.Write(l.secrets); wr.Close() }()
	t.Cleanup(func() { rd.Close() })
	return compute.Spec{
		ID: l.id,
		Binds: []compute.Bind{
			{Src: "/proc/self/exe", Dst: wire.BinPath},
			{Src: l.bundle, Dst: wire.BundlePath},
			{Src: l.manifest, Dst: wire.BundlePath + "/" + wire.ManifestFile},
			{Src: l.workspace, Dst: wire.WorkspacePath, Writable: true},
			{Src: l.out, Dst: wire.OutPath, Writable: true, Result: true},
			{Src: l.gateway, Dst: wire.GatewayPath},
		},
		Files:  []*os.File{rd},
		Stdout: l.stdout, Stderr: l.stderr,
	}
}

func (g *gw) export(t testing.TB, l *layout) *remote.Session {
	t.Helper()
	s, err := g.reg.Export(context.Background(), l.spec(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// echo serves an echo on a Unix socket at path until the test ends.
func echo(t testing.TB, path string) {
	t.Helper()
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerVersion is what a host's gateway reports for the worker these tests run (the real
// agora-worker built beside agoraBin): its identity, bytes and all when unversioned.
func workerVersion() string { return workerremote.VersionOf(agoratest.Worker(agoraBin)) }
