package dispatch_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// certChildEnv makes TestEgress_OpensOneCertificateFile run its dispatches instead of
// tracing them.
const certChildEnv = "AGORA_TEST_CERTFILES_CHILD"

// certStores are the directories a certificate store lives under on Linux hosts.
var certStores = []string{"/etc/ssl/", "/etc/pki/", "/usr/share/ca-certificates/", "/usr/local/share/ca-certificates/"}

// TestEgress_OpensOneCertificateFile measures, with strace, which certificate files the host
// process opens while it runs two egress dispatches whose proxy terminates TLS (so it needs
// the roots it verifies upstream servers with): the system bundle once for the whole
// process, and no other certificate file (every egress dispatch read the bundle, then
// the whole /etc/ssl/certs directory through x509.SystemCertPool: 151 opens for two).
// Only the test binary's own threads count: the sandbox's tools read their trust file too.
func TestEgress_OpensOneCertificateFile(t *testing.T) {
	if os.Getenv(certChildEnv) == "1" {
		runTLSDispatches(t, 2)
		return
	}
	strace := requireTool(t, "strace")
	requireTool(t, "curl")
	requireSandbox(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "openat.trace")
	// -Y prints each pid's command name: the test binary's threads share it, the sandbox's
	// processes (bwrap, the worker, curl) have their own.
	cmd := exec.CommandContext(t.Context(), strace, "-f", "-qq", "-Y", "-e", "trace=openat", "-o", trace,
		self, "-test.run", "^TestEgress_OpensOneCertificateFile$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), certChildEnv+"=1", agoratest.ParentBinaryEnv+"="+agoraBin)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "SKIP") {
		t.Skipf("SKIP: the traced child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("traced child: %v\n%s", err, out)
	}
	comm := filepath.Base(self)
	if len(comm) > 15 { // the kernel keeps 15 bytes of a command name
		comm = comm[:15]
	}
	opened := certFilesOpened(t, trace, comm)
	if len(opened) != 1 || !strings.Contains(opened[0], `"/etc/ssl/certs/ca-certificates.crt"`) {
		t.Fatalf("two egress dispatches opened %d certificate files, want the system bundle once:\n%s",
			len(opened), strings.Join(first(opened, 12), "\n"))
	}
}

// runTLSDispatches runs n dispatches whose proxy terminates TLS (a rule restricts paths)
// and verifies an upstream server signed by egress.ca_certs' CA.
func runTLSDispatches(t *testing.T, n int) {
	ca := newTestCA(t)
	e := netEnv(t, ca)
	port := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok:"+r.URL.Path)
	}))
	e.netSubagent("tls", "  - {host: \""+upstreamAddr+"\", port: "+port+", methods: [GET], paths: [/ok/]}\n",
		"curl -sS https://"+upstreamAddr+":"+port+"/ok/x; echo")
	for range n {
		r := e.run(dispatch.Request{Subagent: "tls"})
		if out := e.stdout(r); r.State != lifecycle.DispatchFinished || !strings.Contains(out, "ok:/ok/x") {
			t.Fatalf("%s %s: %q\n%s", r.State, r.Detail, out, e.logs(r.ID))
		}
	}
}

// certFilesOpened returns the openat lines of trace, by threads named comm, of a path in a
// certificate store (directories included: a directory scan counts).
func certFilesOpened(t *testing.T, trace, comm string) []string {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, rest, ok := strings.Cut(line, "<")
		if !ok || !strings.HasPrefix(rest, comm+">") || !strings.Contains(rest, "openat(") {
			continue
		}
		for _, dir := range certStores {
			if strings.Contains(rest, `"`+dir) || strings.Contains(rest, `"`+strings.TrimSuffix(dir, "/")+`"`) {
				out = append(out, line)
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}
