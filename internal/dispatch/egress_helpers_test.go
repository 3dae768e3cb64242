package dispatch_test

import (
	"archive/zip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/egress"
)

// upstreamAddr is where the tests' servers listen: loopback, but not 127.0.0.1, so the
// sandbox's own loopback (127.0.0.1 inside its namespace) is never confused with it. Tools
// skip a proxy for a loopback literal (Go does, whatever NO_PROXY says), so the tests also
// name it: the proxy's resolver maps testNames to it, and loopName to 127.0.0.1, which
// egress.allow_private does not admit.
const upstreamAddr = "127.0.0.2"

var testNames = []string{"git.test", "mods.test", "registry.test", "api.test"}

const loopName = "loop.test"

// testResolver is the proxy's resolver in these tests.
type testResolver struct{}

func (testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == loopName {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if slices.Contains(testNames, host) {
		return []netip.Addr{netip.MustParseAddr(upstreamAddr)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// testCA is a CA of the test's own, standing in for a team's internal CA: the servers' leaf
// certificates are signed by it, and agora trusts it through egress.ca_certs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agora test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serveTLS serves h over HTTPS on upstreamAddr with a certificate from ca; it returns the
// port.
func (ca *testCA) serveTLS(t *testing.T, h http.Handler) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: upstreamAddr},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(upstreamAddr)}, DNSNames: testNames,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", upstreamAddr+":0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
	})
	if err != nil {
		t.Skipf("SKIP: cannot listen on %s (loopback alias): %v", upstreamAddr, err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// servePlain serves h over plain HTTP on addr; it returns the port.
func servePlain(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("SKIP: cannot listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// netEnv is a dispatch environment whose egress policy admits upstreamAddr (and only it) and
// trusts ca.
func netEnv(t *testing.T, ca *testCA) *env {
	t.Helper()
	e := newEnv(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	if ca != nil {
		e.d.EgressRoots = ca.pem
	}
	return e
}

// netSubagent registers capability NAME-cap granting `sh -c *` and the egress rules (YAML
// list items), and subagent NAME running script under it.
func (e *env) netSubagent(name, egressYAML, script string) {
	e.t.Helper()
	body := "commands: [\"sh -c *\"]\n"
	if egressYAML != "" {
		body += "egress:\n" + egressYAML
	}
	e.scriptSubagent(name, body, script)
}

// scriptSubagent registers capability NAME-cap of capability.yaml text capYAML, and subagent
// NAME running script under `sh -c` with it.
func (e *env) scriptSubagent(name, capYAML, script string) {
	e.t.Helper()
	dir := e.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capability.yaml"), []byte(capYAML), 0o644); err != nil {
		e.t.Fatal(err)
	}
	ctx := e.t.Context()
	pc, err := e.w.PrepareCapability(name+"-cap", dir, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(ctx, "test", "register", pc); err != nil {
		e.t.Fatal(err)
	}
	ps, err := e.w.PrepareSubagent(ctx, name, provision.SubagentSpec{
		Command: []string{"sh", "-c", script}, Capabilities: []string{name + "-cap"},
	}, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(ctx, "test", "register", ps); err != nil {
		e.t.Fatal(err)
	}
}

// logs returns the dispatch's stdout and stderr together.
func (e *env) logs(id string) string {
	e.t.Helper()
	var b strings.Builder
	for _, name := range []string{"stdout.log", "stderr.log"} {
		data, _ := os.ReadFile(filepath.Join(e.d.StateDir, id, name))
		b.Write(data)
	}
	return b.String()
}

// auditDump is every audit entry's kind and details, one per line.
func (e *env) auditDump() string {
	e.t.Helper()
	rows, err := e.home.DB.SQL().QueryContext(e.t.Context(), `SELECT entry FROM audit_entries ORDER BY seq`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var entry string
		if err := rows.Scan(&entry); err != nil {
			e.t.Fatal(err)
		}
		b.WriteString(entry + "\n")
	}
	return b.String()
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIP: %s is not installed (the test drives the real tool)", name)
	}
	return p
}

// zipWriter builds a module zip.
type zipWriter struct{ w *zip.Writer }

func newZip(w io.Writer) *zipWriter { return &zipWriter{w: zip.NewWriter(w)} }

func (z *zipWriter) add(name, body string) {
	f, _ := z.w.Create(name)
	io.WriteString(f, body)
}

func (z *zipWriter) close(t *testing.T) {
	if err := z.w.Close(); err != nil {
		t.Fatal(err)
	}
}
