package dispatch_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// TestLearn_ClaudeWebFetchRealCLI (learn3 part 2, the real claude CLI): the grant has
// no http_fetch and no host. In a learn dispatch claude's WebFetch of a host in
// egress.learn_hosts (an IP literal and one port: claude's WebFetch refuses a name without a
// dot, and the sandbox's NO_PROXY keeps 127.0.0.1 off the proxy) is reported by agora's hook as tool.would_deny
// (tool WebFetch, reporter hook), goes out through the egress proxy, which records it as
// net.would_deny with method and path, and its answer reaches claude; a WebFetch of the same
// host on another port (outside learn_hosts) is refused by the proxy and never reaches that
// server. Failed before: claude's own fence loaded no WebFetch without a granted host, so
// neither fetch ran and nothing was learned.
func TestLearn_ClaudeWebFetchRealCLI(t *testing.T) {
	t.Parallel() // claude itself idles ~30 s (below): the other real-CLI tests run meanwhile
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	dir := t.TempDir()
	caPEM, serve := localhostTLS(t)
	var learnHits, otherHits atomic.Int64
	var learnReq atomic.Value
	learnPort := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		learnHits.Add(1)
		learnReq.Store(r.Method + " " + r.URL.Path)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "learned-page-42")
	}))
	otherPort := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "LEAKED")
	}))
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "sk-ant-api03-e2e-learnfetch-0123456789ab"
	// claude 2.1.330 spends about 30 s between a WebFetch's response and its summary
	// request (not agora's: the proxy closed the connection within 50 ms).
	turns := anthropictest.Turns(
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_fetch01", "WebFetch",
			mustJSON(t, map[string]string{"url": "https://" + upstreamAddr + ":" + learnPort + "/v1/items", "prompt": "what does it say"}))}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_fetch02", "WebFetch",
			mustJSON(t, map[string]string{"url": "https://" + upstreamAddr + ":" + otherPort + "/secret", "prompt": "what does it say"}))}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Done.")}},
	)
	api, err := anthropictest.Start(key, turns)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"ANTHROPIC_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32, %s/32]\n  ca_certs: [%s]\n  learn_hosts: [\"%s:%s\"]\n", bin.Path, upstreamAddr, caFile, upstreamAddr, learnPort)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	registerClaudeLearner(t, h, dir, api.URL, "tools: [run_command]\ncommands: [\"git status\"]\n", "fetcher")
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	learnDispatchFinished(t, h, "fetcher", repo, "fetch")
	results := toolResultsOf(t, api.Requests())
	if learnHits.Load() == 0 || otherHits.Load() != 0 {
		t.Logf("tool results: %q", results)
		t.Errorf("the learn host was fetched %d times and the other port %d; want it fetched and the other never", learnHits.Load(), otherHits.Load())
	}
	if got, _ := learnReq.Load().(string); got != "GET /v1/items" {
		t.Errorf("the learn host saw %q", got)
	}
	type logged struct {
		Details map[string]any `json:"details"`
	}
	read := func(kind string) []logged {
		var l []logged
		if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", kind, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	var reqs []string
	for _, l := range read("net.would_deny") {
		d := l.Details
		reqs = append(reqs, fmt.Sprint(d["host"], " ", d["port"], " ", d["method"], " ", d["path"]))
		if fmt.Sprint(d["port"]) == otherPort {
			t.Errorf("the port outside learn_hosts was recorded as would_deny: %v", d)
		}
	}
	if want := upstreamAddr + " " + learnPort + " GET /v1/items"; !strings.Contains(strings.Join(reqs, "\n"), want) {
		t.Errorf("net.would_deny %q, want %q", reqs, want)
	}
	var tools []string
	for _, l := range read("tool.would_deny") {
		tools = append(tools, fmt.Sprint(l.Details["tool"], " ", l.Details["reporter"], " ", l.Details["call_id"]))
	}
	if !strings.Contains(strings.Join(tools, "\n"), "WebFetch hook toolu_fetch01") {
		t.Errorf("tool.would_deny %q, want WebFetch reported by the hook", tools)
	}
	if got := results["toolu_fetch02"]; strings.Contains(got, "LEAKED") || !strings.Contains(got, "proxy refused") {
		t.Errorf("the fetch outside learn_hosts came back %q", got)
	}
}

// localhostTLS returns a CA's PEM and a function serving a handler over HTTPS on upstreamAddr
// with a certificate for localhost from that CA, returning its port.
func localhostTLS(t *testing.T) ([]byte, func(http.Handler) string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agora learn fetch CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), func(h http.Handler) string {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP(upstreamAddr)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", upstreamAddr+":0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
		if err != nil {
			t.Skipf("SKIP: cannot listen on %s (loopback alias): %v", upstreamAddr, err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
}
