package netgw

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files LoadOrCreateCA keeps in the keys directory.
const (
	CACertFile     = "gateway-ca.pem"
	caKeyFile      = "gateway-ca.key"
	ServerCertFile = "gateway.pem"
	serverKeyFile  = "gateway.key"
)

// Validity of the certificates LoadOrCreateCA makes; a server certificate is renewed when
// less than renewBefore of it is left.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 365 * 24 * time.Hour
	renewBefore    = 30 * 24 * time.Hour
)

// Certs are the gateway's TLS material.
type Certs struct {
	// CAPEM is the CA certificate pods trust (remote.CAEnv).
	CAPEM []byte
	// Server is the server certificate and key.
	Server tls.Certificate
}

// LoadOrCreateCA loads the gateway's CA and server certificate from dir (AGORA_HOME/keys),
// making what is missing: a CA of its own (ECDSA P-256), used for nothing else, and a server
// certificate for hosts (DNS names or IP addresses). A server certificate that does not name
// every host, or is about to expire, is replaced. Keys are written 0600.
func LoadOrCreateCA(dir string, hosts []string) (*Certs, error) {
	if len(hosts) == 0 {
		return nil, errors.New("gateway certificate: no host to certify; give the address pods reach the gateway at (--advertise)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	caCert, caKey, caPEM, err := loadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ServerCertFile), filepath.Join(dir, serverKeyFile))
	if err == nil && covers(cert.Leaf, caCert, hosts) {
		return &Certs{CAPEM: caPEM, Server: cert}, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	cert, err = issueServer(dir, caCert, caKey, hosts)
	if err != nil {
		return nil, err
	}
	return &Certs{CAPEM: caPEM, Server: cert}, nil
}

// EnsureCA makes the gateway's CA in dir (AGORA_HOME/keys) when it is not there, and reports
// whether it made it. Replicas that share one gateway address (two serves on a Lease)
// share this CA, copied into each home with the other keys: a Job made under one leader trusts
// the certificate of the next.
func EnsureCA(dir string) (bool, error) {
	if _, err := os.Lstat(filepath.Join(dir, caKeyFile)); err == nil {
		_, _, _, err := loadOrCreateCA(dir)
		return false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("gateway CA: %w", err)
	}
	_, _, _, err := loadOrCreateCA(dir)
	return err == nil, err
}

func loadOrCreateCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, caKeyFile)
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, nil, fmt.Errorf("gateway CA %s: not an ECDSA key", keyPath)
		}
		caPEM, err := os.ReadFile(certPath)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("gateway CA: %w", err)
		}
		return pair.Leaf, key, caPEM, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("gateway CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agora gateway CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway CA: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// The key first: a CA certificate without its key would be loaded as broken.
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, nil, err
	}
	if err := writeFile(certPath, caPEM, 0o644); err != nil {
		return nil, nil, nil, err
	}
	return cert, key, caPEM, nil
}

func issueServer(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("gateway certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "agora gateway"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("gateway certificate: %w", err)
	}
	keyPath, certPath := filepath.Join(dir, serverKeyFile), filepath.Join(dir, ServerCertFile)
	if err := writeKey(keyPath, key); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certPath, keyPath)
}

// covers reports whether leaf was issued by ca, names every host and is not about to expire.
func covers(leaf, ca *x509.Certificate, hosts []string) bool {
	if leaf == nil || leaf.CheckSignatureFrom(ca) != nil || time.Until(leaf.NotAfter) < renewBefore {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(leaf.DNSNames, h) {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("gateway key: %w", err)
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeFile writes path atomically with mode.
func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := writeAtomic(path, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// writeAtomic writes path with mode through a temporary file beside it renamed into place, so
// a reader sees the whole file or none.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
