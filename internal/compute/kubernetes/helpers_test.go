package kubernetes

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Digest-pinned images for tests; kwok runs no image, so any pinned reference does.
const (
	testImage       = "registry.example/agents/toolchain@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testWorkerImage = "registry.example/agora/worker:v1@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	testGateway     = "https://10.250.0.1:8443"
)

// fakeExporter stands in for the network gateway: a fresh random token per Export, fixed
// mounts, and a count of sessions still open.
type fakeExporter struct {
	mu      sync.Mutex
	tokens  []string
	open    int
	exports int
	mounts  []remote.Mount
	err     error
}

func (f *fakeExporter) Export(ctx context.Context, spec compute.Spec) (*remote.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	b := make([]byte, 32)
	rand.Read(b)
	tok := "agtok_" + hex.EncodeToString(b)
	f.tokens = append(f.tokens, tok)
	f.open++
	f.exports++
	var once sync.Once
	mounts := f.mounts
	if mounts == nil {
		mounts = testMounts()
	}
	return &remote.Session{Dispatch: spec.ID, Token: tok, Mounts: mounts, Files: len(spec.Files),
		Close: func() error {
			once.Do(func() { f.mu.Lock(); f.open--; f.mu.Unlock() })
			return nil
		}}, nil
}

func (f *fakeExporter) openSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func (f *fakeExporter) allTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.tokens...)
}

// testMounts are the mounts a dispatch's binds become (netgw's mapping).
func testMounts() []remote.Mount {
	return []remote.Mount{
		{Name: "bundle", Dst: "/agora/bundle", Fetch: true},
		{Name: "workspace", Dst: "/agora/workspace", Writable: true, Fetch: true},
		{Name: "out", Dst: "/agora/out", Writable: true, Result: true},
		{Name: "gateway", Dst: "/agora/gateway", Writable: true, Sockets: []string{"gateway.sock"}},
		{Name: "trust", Dst: "/etc/ssl/certs/ca-certificates.crt", File: true, Fetch: true},
	}
}

// testSpec is a dispatch's spec as the supervisor builds it.
func testSpec(id string) compute.Spec {
	return compute.Spec{
		ID:   id,
		Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "AGORA_DISPATCH_ID=" + id, "AGORA_PROXY_TOKEN=proxy-password-xyz"},
		Dir:  "/agora/workspace",
		Binds: []compute.Bind{
			{Src: "/usr/local/bin/agora", Dst: "/agora/bin/agora-worker"},
			{Src: "/home/x/bundle", Dst: "/agora/bundle"},
			{Src: "/home/x/out", Dst: "/agora/out", Writable: true, Result: true},
		},
		Limits: compute.Limits{Timeout: 90 * time.Second, Memory: 1 << 30, Scratch: 256 << 20},
	}
}

// testCA is a throwaway CA certificate in PEM.
func testCA(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agora test gateway CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// testOptions are valid options over exp.
func testOptions(t testing.TB, exp remote.Exporter) Options {
	return Options{Namespace: "agents", Image: testImage, WorkerImage: testWorkerImage, CPU: "500m", Memory: "256Mi",
		GatewayURL: testGateway, GatewayCA: testCA(t), Exporter: exp, Target: "k8s"}
}
