package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// testRunAs is the host user root runs test sandboxes as: the default sandbox uid of
// agora.yaml, which no account owns.
var testRunAs = &compute.HostUser{UID: 0x70000000, GID: 0x70000000}

// requireBwrap skips loudly when bubblewrap cannot run here.
func requireBwrap(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip("SKIP: bubblewrap not installed: apt-get install bubblewrap (" + err.Error() + ")")
	}
}

func newProvider(t testing.TB, opts Options) *Provider {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// syncBuffer: a process writes it while the test reads it.
type syncBuffer = agoratest.SyncBuffer

// result is one finished run.
type result struct {
	exit           compute.Exit
	stdout, stderr string
}

// run starts s through p and waits for it.
func run(t testing.TB, p *Provider, s compute.Spec) result {
	t.Helper()
	var out, errOut syncBuffer
	s.Stdout, s.Stderr = &out, &errOut
	if s.Env == nil {
		s.Env = []string{"PATH=/usr/bin:/bin"}
	}
	h, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	exit, err := h.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return result{exit: exit, stdout: out.String(), stderr: errOut.String()}
}

// probeBind binds the test binary into the sandbox at /probe.
func probeBind(t testing.TB) compute.Bind {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return compute.Bind{Src: exe, Dst: "/probe"}
}

// procsWith returns the pids of host processes whose command line contains marker.
func procsWith(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// sleepsWith counts host processes that are exactly `sleep <marker>`.
func sleepsWith(marker string) int {
	n := 0
	for _, pid := range procsWith(marker) {
		b, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if string(b) == "sleep\x00"+marker+"\x00" {
			n++
		}
	}
	return n
}

// requireUserNS skips loudly where this kernel makes no user namespaces.
func requireUserNS(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skipf("SKIP: no user namespaces here (max_user_namespaces %q, %v)", b, err)
	}
}
