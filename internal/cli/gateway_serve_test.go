package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// TestGatewayServeRun runs the real gateway (agora gateway serve, the factory's NetworkGateway): it makes its CA in AGORA_HOME/keys (keys 0600),
// serves TLS 1.3 with a certificate for the advertised host, and stops on cancel.
func TestGatewayServeRun(t *testing.T) {
	dir, errOut, done, cancel := startGatewayServe(t, func(string) string { return "" }, "127.0.0.1:0")
	ctx := t.Context()
	addr := regexp.MustCompile(`serving on (127\.0\.0\.1:\d+)`).FindStringSubmatch(errOut.String())[1]
	caPEM, err := os.ReadFile(filepath.Join(dir, home.KeyDir, netgw.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"gateway-ca.key", "gateway.key"} {
		if fi, err := os.Stat(filepath.Join(dir, home.KeyDir, k)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", k, fi, err)
		}
	}
	pool := caPool(t, dir)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to the gateway with its CA: %v", err)
	}
	if v := conn.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("TLS version %x, want 1.3", v)
	}
	conn.Close()
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS 1.2 client was accepted")
	}
	// It serves the home's warm slots too: a slot made in
	// AGORA_HOME/gateway/slots by a resident agora is claimed through it.
	sess, err := (&netgw.Registry{Dir: filepath.Join(dir, GatewaySessionsDir)}).Export(t.Context(), compute.Spec{ID: "01GWSLOT"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sl, err := (&netgw.Slots{Dir: filepath.Join(dir, GatewaySlotsDir)}).Create(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	bound := make(chan error, 1)
	go func() { bound <- sl.Bind(ctx, sess.Dispatch, sess.Token) }()
	cctx, ccancel := context.WithTimeout(t.Context(), 30*time.Second)
	c, err := workerremote.Claim(cctx, "https://"+addr, sl.ID, sl.Token, caPEM, nil)
	ccancel()
	if err != nil {
		t.Errorf("claim of the home's warm slot through gateway serve: %v", err)
	} else {
		if c.Dispatch() != "01GWSLOT" {
			t.Errorf("claimed dispatch %q", c.Dispatch())
		}
		c.Close()
		if err := <-bound; err != nil {
			t.Errorf("Bind: %v", err)
		}
	}
	cancel()
	if code := <-done; code != cmdutil.ExitOK {
		t.Errorf("gateway serve after cancel: exit %d, want %d", code, cmdutil.ExitOK)
	}
}

// startGatewayServe runs `agora gateway serve --listen listen` in a new home, with getenv's
// variables beside AGORA_HOME, until the test cancels it, and returns once it says it serves:
// the home, its stderr, its exit code to come and its cancel.
func startGatewayServe(t *testing.T, getenv func(string) string, listen string) (string, *gatewayErr, chan int, context.CancelFunc) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "home")
	errOut := &gatewayErr{serving: make(chan struct{})}
	f := NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: errOut}, func(k string) string {
		if k == "AGORA_HOME" {
			return dir
		}
		return getenv(k)
	})
	t.Cleanup(func() { f.Close() })
	if _, err := home.Init(t.Context(), dir, agoradb.Migrations()); err != nil { // only 'agora init' makes a home
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, f, []string{"gateway", "serve", "--listen", listen, "--advertise", "https://127.0.0.1:8443"})
	}()
	// Its line on stderr is the event the wait is for; the test's own timeout bounds it.
	select {
	case <-errOut.serving:
	case code := <-done:
		cancel()
		t.Fatalf("the gateway exited %d before serving: %s", code, errOut.String())
	}
	return dir, errOut, done, cancel
}

// caPool is the pool of home dir's gateway CA.
func caPool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, home.KeyDir, netgw.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return pool
}

// gatewayErr is the gateway's stderr, closing serving once it says it serves.
type gatewayErr struct {
	agoratest.SyncBuffer
	once    sync.Once
	serving chan struct{}
}

func (g *gatewayErr) Write(p []byte) (int, error) {
	n, err := g.SyncBuffer.Write(p)
	if strings.Contains(g.String(), "serving on ") {
		g.once.Do(func() { close(g.serving) })
	}
	return n, err
}
