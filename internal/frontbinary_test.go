package internal_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFrontBinary caps the size of the front every `agora` command starts (the whole
// program is ~60 MB and spends milliseconds in its dependencies' inits; the front is 3.8 MB).
const maxFrontBinary = 5 << 20

// frontUnlinked are standard packages the front must not link: it speaks HTTP/1.1 to serve's
// socket itself, on a blocking socket of its own (cmd/agora/serveconn.go). net/http with the
// TLS, x509 and HTTP/2 it brings was half the front's size and package inits (9.1 MB, 81
// inits; without: 4.5 MB, 39), and net's network poller most of its dial.
var frontUnlinked = []string{"net", "net/http", "crypto/tls", "crypto/x509", "os/exec"}

// frontModules are exactly the third-party modules the front (cmd/agora) links: a one-shot
// hand-off needs the Unix socket's peer credentials and nothing else outside the standard
// library.
var frontModules = []string{"golang.org/x/sys"}

// frontPackages are exactly agora's own packages the front links: the hand-off's wire format
// (orch/api and what its request names), the answer to serve's challenge (callerctx) and the
// escaping of serve's reason for a decline (agenttext), and what `agora version` prints (version).
var frontPackages = []string{
	"cmd/agora", "internal/agenttext", "internal/budget", "internal/callerctx", "internal/jcs", "internal/jsonstr", "internal/orch/api",
	"internal/shellwords", "internal/strictjson", "internal/verdict", "internal/version",
}

// TestFrontBinary is the front's binary-level check, as TestWorkerBinary is the worker's: it
// builds cmd/agora as shipped and reads the module list the linker wrote into it, so no
// command-line framework, container client, Kubernetes client, telemetry, metrics or SQLite
// (and none of their package inits) joins the program every `agora` command starts. Its own
// packages are pinned from the import graph.
func TestFrontBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: builds cmd/agora")
	}
	bin := filepath.Join(t.TempDir(), "agora")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/agora")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/agora: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxFrontBinary {
		t.Errorf("agora (the front) is %d bytes, over the %d byte cap: something heavy joined it", fi.Size(), maxFrontBinary)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v%s", err, stderrOf(err))
	}
	path, mods := buildInfoModules(string(out))
	if path != module+"cmd/agora" {
		t.Errorf("the binary's main package is %q, want %s", path, module+"cmd/agora")
	}
	if d := lineDiff(frontModules, mods); d != "" {
		t.Errorf("the modules linked into the front are not frontModules (+ now linked, - no longer linked):\n%s"+
			"the front must stay small: a command that needs more belongs to agora-full", d)
	}
	deps, err := exec.Command("go", "list", "-deps", "../cmd/agora").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v%s", err, stderrOf(err))
	}
	var own []string
	for line := range strings.Lines(string(deps)) {
		p := strings.TrimSpace(line)
		if slices.Contains(frontUnlinked, p) {
			t.Errorf("the front links %s: it must not (frontUnlinked)", p)
		}
		if p, ok := strings.CutPrefix(p, module); ok {
			own = append(own, p)
		}
	}
	slices.Sort(own)
	if d := lineDiff(frontPackages, own); d != "" {
		t.Errorf("agora's packages linked into the front are not frontPackages (+ now linked, - no longer linked):\n%s", d)
	}
	t.Logf("agora front: %d bytes, modules %v", fi.Size(), mods)
}
