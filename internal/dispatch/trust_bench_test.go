package dispatch

import (
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// legacyLoadSystemRoots is what x509.SystemCertPool does the first time in a Linux process
// (Go 1.26, crypto/x509/root_unix.go loadSystemRoots, without its env overrides): the first
// bundle found, then every file of the certificate directories except same-directory
// symlinks. The standard library caches it for the process, so the benchmark's baseline
// repeats it here to measure, in the same run, what the old code paid once per process.
func legacyLoadSystemRoots() *x509.CertPool {
	roots := x509.NewCertPool()
	for _, file := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem", "/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"} {
		if data, err := os.ReadFile(file); err == nil {
			roots.AppendCertsFromPEM(data)
			break
		}
	}
	for _, dir := range []string{"/etc/ssl/certs", "/etc/pki/tls/certs"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Type()&os.ModeSymlink != 0 {
				if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && !strings.Contains(target, "/") {
					continue
				}
			}
			if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				roots.AppendCertsFromPEM(data)
			}
		}
	}
	return roots
}

// legacyTrust is the old prepareProxy's certificate work: read the bundle for the sandbox,
// then the system pool (load is legacyLoadSystemRoots the first time in a process, the
// standard library's cached pool after) with egress.ca_certs added.
func legacyTrust(b *testing.B, load func() *x509.CertPool, extra []byte) {
	f, err := os.Open(wire.SystemTrustFile)
	if err != nil {
		b.Fatal(err)
	}
	io.ReadAll(io.LimitReader(f, maxSystemTrust))
	f.Close()
	pool := load().Clone()
	if !pool.AppendCertsFromPEM(extra) {
		b.Fatal("no extra root")
	}
}

// BenchmarkProxyTrust is a TLS-terminating egress dispatch's certificate work, with
// egress.ca_certs set: per process (the one-shot CLI pays it on every dispatch) and per
// further dispatch of a resident process (orch serve), old code path beside new.
func BenchmarkProxyTrust(b *testing.B) {
	if _, err := os.Stat(wire.SystemTrustFile); err != nil {
		b.Skipf("SKIP: no system bundle at %s", wire.SystemTrustFile)
	}
	_, extra := selfSigned(b)
	b.Run("process/old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			legacyTrust(b, legacyLoadSystemRoots, extra)
		}
	})
	b.Run("process/new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sys, err := readSystemTrust()
			if err != nil {
				b.Fatal(err)
			}
			pool := parseSystemRoots(sys).Clone()
			if !pool.AppendCertsFromPEM(extra) {
				b.Fatal("no extra root")
			}
		}
	})
	b.Run("dispatch/old", func(b *testing.B) {
		b.ReportAllocs()
		stdlib := func() *x509.CertPool {
			p, err := x509.SystemCertPool()
			if err != nil {
				b.Fatal(err)
			}
			return p
		}
		for b.Loop() {
			legacyTrust(b, stdlib, extra)
		}
	})
	b.Run("dispatch/new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := systemTrust(); err != nil {
				b.Fatal(err)
			}
			if _, err := upstreamRoots(extra); err != nil {
				b.Fatal(err)
			}
		}
	})
}
