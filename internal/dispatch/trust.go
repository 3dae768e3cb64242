package dispatch

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// maxSystemTrust caps the system trust store read for the sandbox's.
const maxSystemTrust = 4 << 20

// systemTrust is the system's trust bundle (wire.SystemTrustFile, capped), read once per
// process on the first egress dispatch: every sandbox's trust file starts with it. A missing
// bundle is empty, as it always was. A long-running process keeps the bundle it read first,
// as Go's own system roots do.
var systemTrust = sync.OnceValues(readSystemTrust)

// readSystemTrust reads the system bundle; see systemTrust.
func readSystemTrust() ([]byte, error) {
	f, err := os.Open(wire.SystemTrustFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("system trust store: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSystemTrust))
	if err != nil {
		return nil, fmt.Errorf("system trust store: %w", err)
	}
	return b, nil
}

// systemRoots is the pool the egress proxy verifies upstream servers with, parsed once per
// process, and only when a dispatch's proxy terminates TLS. It is the bundle the sandbox is
// given, so the proxy trusts what the sandbox's tools would have: x509.SystemCertPool would
// read the bundle again and then every file of /etc/ssl/certs (150 opens on Debian, the same
// certificates). A host without the bundle falls back to Go's system roots.
var systemRoots = sync.OnceValues(func() (*x509.CertPool, error) {
	b, err := systemTrust()
	if err != nil {
		return nil, err
	}
	return parseSystemRoots(b), nil
})

// parseSystemRoots is the pool of bundle b, or Go's system roots when b holds no
// certificate (a host keeping its roots elsewhere, /etc/pki on Fedora).
func parseSystemRoots(b []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	if pool.AppendCertsFromPEM(b) {
		return pool
	}
	if pool, err := x509.SystemCertPool(); err == nil && pool != nil {
		return pool
	}
	return pool
}

// upstreamRoots is systemRoots with extra (egress.ca_certs) added. The shared pool is only
// read, never changed: extra roots go into a clone.
func upstreamRoots(extra []byte) (*x509.CertPool, error) {
	pool, err := systemRoots()
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return pool, nil
	}
	pool = pool.Clone()
	if !pool.AppendCertsFromPEM(extra) {
		return nil, fmt.Errorf("egress.ca_certs: no certificate found")
	}
	return pool, nil
}
