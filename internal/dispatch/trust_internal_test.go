package dispatch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// selfSigned is a fresh CA certificate and its PEM.
func selfSigned(t testing.TB) (*x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agora trust test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestUpstreamRoots_ExtraNeverJoinsTheSharedPool: the process-wide pool is shared by every
// dispatch; one Dispatcher's egress.ca_certs must not become another's trusted root.
func TestUpstreamRoots_ExtraNeverJoinsTheSharedPool(t *testing.T) {
	cert, certPEM := selfSigned(t)
	opts := func(p *x509.CertPool) x509.VerifyOptions { return x509.VerifyOptions{Roots: p} }
	withExtra, err := upstreamRoots(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(opts(withExtra)); err != nil {
		t.Fatalf("the extra root is not trusted with egress.ca_certs: %v", err)
	}
	plain, err := upstreamRoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(opts(plain)); err == nil {
		t.Fatal("egress.ca_certs leaked into the shared system pool")
	}
	if _, err := upstreamRoots([]byte("not pem")); err == nil {
		t.Fatal("egress.ca_certs without a certificate was accepted")
	}
}

// TestParseSystemRoots: the bundle's certificates are the pool; a bundle with none (a host
// without /etc/ssl/certs/ca-certificates.crt) falls back to Go's system roots, not to an
// empty pool that would fail every upstream.
func TestParseSystemRoots(t *testing.T) {
	cert, certPEM := selfSigned(t)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: parseSystemRoots(certPEM)}); err != nil {
		t.Fatalf("the bundle's certificate is not in the pool: %v", err)
	}
	sys, err := x509.SystemCertPool()
	if err != nil || sys == nil {
		t.Skipf("SKIP: this host has no system roots to fall back to: %v", err)
	}
	if !parseSystemRoots(nil).Equal(sys) {
		t.Fatal("an empty bundle did not fall back to the system's roots")
	}
}
