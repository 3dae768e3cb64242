package k8stest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's one CA and the files made from it. ECDSA P-256 throughout: a key takes
// microseconds, where RSA 2048 would add a visible share of the start time.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

// identity is a client or serving certificate with its key, as files and as PEM.
type identity struct {
	certFile, keyFile string
	certPEM, keyPEM   []byte
}

func newPKI(dir string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agora-k8stest-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, caPEM: pemBlock("CERTIFICATE", der)}
	if err := os.WriteFile(p.caFile(), p.caPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write CA certificate: %w", err)
	}
	return p, nil
}

func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.crt") }

// client issues a client certificate: Kubernetes takes the user from the common name and the
// groups from the organizations (system:masters is the admin group RBAC never restricts).
func (p *pki) client(name, cn string, groups ...string) (*identity, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// serving issues a server certificate for loopback and the given extra addresses and names.
func (p *pki) serving(name string, ips []net.IP, dns ...string) (*identity, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
		DNSNames:    append([]string{"localhost"}, dns...),
	})
}

func (p *pki) issue(name string, tmpl *x509.Certificate) (*identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", name, err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key for %s: %w", name, err)
	}
	id := &identity{
		certFile: filepath.Join(p.dir, name+".crt"),
		keyFile:  filepath.Join(p.dir, name+".key"),
		certPEM:  pemBlock("CERTIFICATE", der),
		keyPEM:   pemBlock("PRIVATE KEY", keyDER),
	}
	if err := os.WriteFile(id.certFile, id.certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write certificate for %s: %w", name, err)
	}
	if err := os.WriteFile(id.keyFile, id.keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write key for %s: %w", name, err)
	}
	return id, nil
}

// serviceAccountKeys writes the key pair the apiserver signs service-account tokens with and
// the controller-manager mints them with: sa.key (private, PKCS#8) and sa.pub (PKIX).
func (p *pki) serviceAccountKeys() (keyFile, pubFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate service-account key: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("marshal service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("marshal service-account public key: %w", err)
	}
	keyFile, pubFile = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(keyFile, pemBlock("PRIVATE KEY", keyDER), 0o600); err != nil {
		return "", "", fmt.Errorf("write service-account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pemBlock("PUBLIC KEY", pubDER), 0o600); err != nil {
		return "", "", fmt.Errorf("write service-account public key: %w", err)
	}
	return keyFile, pubFile, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // crypto/rand does not fail on Linux
	}
	return n
}
