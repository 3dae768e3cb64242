// Package s3test starts a real S3-compatible server for tests: versitygw (posix backend, with
// versioning and Object Lock) built by scripts/s3-tools.sh into .cache/s3/bin, listening on a
// loopback port over a temporary directory. One server per test package ([Shared]); each test
// takes a bucket of its own ([Server.Bucket]). It is imported by tests only.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/s3"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT (http://HOST:PORT for [StartOn]).
	Endpoint string
	// Creds are the root user's credentials.
	Creds s3.Credentials
	// Dir is the posix backend's root (one directory per bucket); a test may tamper there.
	Dir string

	cmd    *exec.Cmd
	tmp    string
	next   atomic.Int64
	policy egress.Policy
}

// Policy is the egress policy that reaches the server.
func Policy() egress.Policy {
	return egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the package's server, starting it on first use; a missing binary is a loud
// skip naming the script that builds it. TestMain should call [StopShared] after m.Run.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	var skip *skipError
	if errors.As(sharedErr, &skip) {
		t.Skip(skip.Error())
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// StopShared stops the package's server if one was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

type skipError struct{ why string }

func (e *skipError) Error() string { return "SKIP: " + e.why }

// Bin is the versitygw binary: $AGORA_S3_BIN, or .cache/s3/bin/versitygw of the module.
func Bin() (string, error) {
	if b := os.Getenv("AGORA_S3_BIN"); b != "" {
		return b, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "s3", "bin", "versitygw"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start starts a server on loopback; the caller stops it.
func Start() (*Server, error) { return StartOn("127.0.0.1") }

// StartOn starts a server listening on the address host of this machine (one pods of a real
// node reach, say); the caller stops it. Its clients' egress policy admits host alone.
func StartOn(host string) (*Server, error) {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("s3test: listen address %q: %w", host, err)
	}
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, &skipError{why: "versitygw not built at " + bin + ": run scripts/s3-tools.sh"}
	}
	tmp, err := os.MkdirTemp("", "agora-s3test")
	if err != nil {
		return nil, err
	}
	s := &Server{tmp: tmp, Dir: filepath.Join(tmp, "data"),
		policy: egress.Policy{AllowPrivate: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}},
		Creds:  s3.Credentials{AccessKeyID: "AGORATEST" + randHex(6), SecretAccessKey: randHex(20)}}
	for _, d := range []string{s.Dir, filepath.Join(tmp, "versions")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
	}
	port, err := agoratest.FreePort(host)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	log, err := os.Create(filepath.Join(tmp, "versitygw.log"))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	defer log.Close()
	s.Endpoint = "http://" + net.JoinHostPort(host, port)
	s.cmd = exec.Command(bin, "--port", net.JoinHostPort(host, port), "--quiet",
		"posix", "--versioning-dir", filepath.Join(tmp, "versions"), s.Dir)
	// The credentials reach the server through its environment, not its argv.
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.Creds.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+s.Creds.SecretAccessKey)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// No Pdeathsig: Linux sends it when the OS thread that started the child exits, which
	// the Go runtime may do mid-test (the server died under -race). TestMain stops it.
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	if err := s.waitReady(); err != nil {
		b, _ := os.ReadFile(filepath.Join(tmp, "versitygw.log"))
		s.Stop()
		return nil, fmt.Errorf("versitygw did not come up: %v\n%s", err, b)
	}
	return s, nil
}

func (s *Server) waitReady() error {
	// No keep-alive: an idle connection's goroutines would read as leaks to goleak.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("no answer on " + s.Endpoint + " within 20s")
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	os.RemoveAll(s.tmp)
}

// Bucket creates a new bucket (with Object Lock, so versioning, when objectLock) and returns
// its config, prefix "agora/".
func (s *Server) Bucket(t testing.TB, objectLock bool) s3.Config {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", s.next.Add(1), strings.ToLower(randHex(4)))
	cfg := s3.Config{Endpoint: s.Endpoint, Bucket: name, Prefix: "agora/"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client(t, cfg)
	defer c.CloseIdleConnections()
	if err := c.CreateBucket(ctx, objectLock); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return cfg
}

// Client is a client of cfg with the server's credentials.
func (s *Server) Client(t testing.TB, cfg s3.Config) *s3.Client {
	t.Helper()
	c, err := s3.New(cfg, s.Creds, s.policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}
