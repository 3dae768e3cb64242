package selftest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The granted host also speaks TLS, on two ports, with a certificate of a CA the runner makes
// for the run: the throw-away home's egress.ca_certs names it, so the proxy verifies the host
// as it verifies any. A credential bound to the first port makes the proxy terminate TLS for
// that host and read its requests, which the credential and Host attacks need.

// startTLS serves the granted host over TLS on two ports of grantedAddr, and writes the CA's
// certificate to dir/ca.pem. It leaves the TLS ports 0 when it cannot.
func (fx *fixtures) startTLS(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agora selftest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: grantedAddr},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(grantedAddr)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	fx.caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(fx.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return fmt.Errorf("write the selftest's CA: %w", err)
	}
	// Each server gets its own copy: serving sets its protocols on the config.
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	for _, port := range []*int{&fx.tlsPort, &fx.tlsPort2} {
		l, err := net.Listen("tcp", grantedAddr+":0")
		if err != nil {
			return err
		}
		*port = l.Addr().(*net.TCPAddr).Port
		srv := &http.Server{Handler: http.HandlerFunc(fx.handle), ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet, TLSConfig: cfg.Clone()}
		fx.closers = append(fx.closers, srv)
		fx.wg.Add(1)
		go func() {
			defer fx.wg.Done()
			srv.ServeTLS(l, "", "")
		}()
	}
	return nil
}
