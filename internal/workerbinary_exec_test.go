package internal_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// execWorkerOmits are what the exec-only worker (cmd/agora-worker built with the
// agora_worker_exec tag, installed as agora-worker-exec) leaves out, which is all it is for:
// the HTTP client and TLS the model runtimes and a pod's gateway client bring, and the model
// runtimes themselves. Its start is the worker's less their package initialisation and pages.
// (The runtimes' descriptions, <dir>/<name>def, stay: the manifest format knows every runtime.)
var execWorkerOmits = []string{
	"net/http", "crypto/tls", "crypto/x509",
	module + "internal/runtime/claudert", module + "internal/runtime/claudert/claudeadapter",
	module + "internal/runtime/codexrt", module + "internal/runtime/codexrt/codexadapter",
	module + "internal/runtime/openairt", module + "internal/runtime/openairt/openaiadapter",
	module + "internal/worker/remote",
}

// TestExecWorkerBinary builds the exec-only worker as make build does and checks, in its import
// graph and in the linked binary's symbols, that it holds none of execWorkerOmits; that it is
// cmd/agora-worker still (the host's pin checks the main package's path); that its modules
// are the worker's, less some; and that it refuses what only agora-worker does with a message
// naming it.
func TestExecWorkerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: builds cmd/agora-worker with the agora_worker_exec tag")
	}
	deps, err := exec.Command("go", "list", "-tags", "agora_worker_exec", "-deps", "../cmd/agora-worker").Output()
	if err != nil {
		t.Fatalf("go list: %v%s", err, stderrOf(err))
	}
	for _, p := range strings.Fields(string(deps)) {
		for _, o := range execWorkerOmits {
			if p == o {
				t.Errorf("the exec-only worker imports %s, which it exists to leave out", p)
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "agora-worker-exec")
	build := exec.Command("go", "build", "-trimpath", "-tags", "agora_worker_exec", "-o", bin, "../cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the exec-only worker: %v\n%s", err, out)
	}
	syms, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v%s", err, stderrOf(err))
	}
	for line := range strings.Lines(string(syms)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		for _, o := range []string{"net/http.", "crypto/tls."} {
			if strings.HasPrefix(f[len(f)-1], o) {
				t.Fatalf("the exec-only worker links %s", f[len(f)-1])
			}
		}
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v%s", err, stderrOf(err))
	}
	if !strings.Contains(string(out), "\tbuild\t-tags=agora_worker_exec\n") {
		t.Errorf("the binary does not say it was built with -tags=agora_worker_exec:\n%s", out)
	}
	path, mods := buildInfoModules(string(out))
	if path != module+"cmd/agora-worker" {
		t.Errorf("the binary's main package is %q, want %s: the host's pin checks it", path, module+"cmd/agora-worker")
	}
	pinned, err := readClosure(filepath.Join("testdata", "closure-agora-worker.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if !slices.Contains(pinned, m) {
			t.Errorf("the exec-only worker links module %s, which agora-worker does not", m)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"worker", "fetch"}, 1, "exec-only worker (agora-worker-exec)"},
		{[]string{"worker", "fill"}, 1, "exec-only worker (agora-worker-exec)"},
		{[]string{"worker", "hook", "PreToolUse"}, 2, "no runtime of this build has a tool hook"},
	} {
		cmd := exec.Command(bin, c.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("agora-worker-exec %s: exit %d, %q; want exit %d saying %q", strings.Join(c.args, " "), code, stderr.String(), c.code, c.says)
		}
	}
}
