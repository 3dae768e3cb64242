package internal_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxWorkerBinary caps the size of the worker binary every sandbox and every Claude Code hook
// event starts (the full agora binary was 92 MB).
const maxWorkerBinary = 20 << 20

// workerForbidden are module path prefixes the built worker binary must not hold, whatever
// links them: the host's Kubernetes client, telemetry SDK and exporters, metrics, database,
// container engine client and command-line framework.
var workerForbidden = []string{
	"k8s.io/", "sigs.k8s.io/", "go.opentelemetry.io/", "github.com/prometheus/", "modernc.org/",
	"github.com/moby/", "github.com/containerd/", "github.com/spf13/cobra", "google.golang.org/grpc",
}

// TestWorkerBinary is the binary-level check, in the style of tailscale's depaware: it builds
// cmd/agora-worker as shipped (static, -trimpath) and reads the module list the linker wrote
// into it (`go version -m`), so what is checked is what runs in the sandbox, not the import
// graph's idea of it. The modules must be exactly the third-party lines of
// testdata/closure-agora-worker.txt (go test ./internal -run Closure -update rewrites it),
// none may be host-only, and the binary must stay within maxWorkerBinary.
func TestWorkerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: builds cmd/agora-worker")
	}
	bin := filepath.Join(t.TempDir(), "agora-worker")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/agora-worker: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxWorkerBinary {
		t.Errorf("agora-worker is %d bytes, over the %d byte cap: something host-only or heavy joined the sandbox side", fi.Size(), maxWorkerBinary)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v%s", err, stderrOf(err))
	}
	path, mods := buildInfoModules(string(out))
	if path != module+"cmd/agora-worker" {
		t.Errorf("the binary's main package is %q, want %s", path, module+"cmd/agora-worker")
	}
	for _, m := range mods {
		for _, f := range workerForbidden {
			if strings.HasPrefix(m, f) {
				t.Errorf("agora-worker links module %s, which is host-only (%s)", m, f)
			}
		}
	}
	pinned, err := readClosure(filepath.Join("testdata", "closure-agora-worker.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(pinned, func(l string) bool { return strings.HasPrefix(l, module) })
	if d := lineDiff(want, mods); d != "" {
		t.Errorf("the modules linked into agora-worker are not internal/testdata/closure-agora-worker.txt's (+ now linked, - no longer linked):\n%s"+
			"if the change is intended, run `go test ./internal -run Closure -update` and say why in the commit", d)
	}
	t.Logf("agora-worker: %d bytes, %d third-party modules", fi.Size(), len(mods))
}

// buildInfoModules reads `go version -m` output: the main package's path and the dependency
// modules, sorted (a replaced module counts by its original path).
func buildInfoModules(out string) (path string, mods []string) {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "path":
			path = f[1]
		case len(f) >= 2 && f[0] == "dep":
			mods = append(mods, f[1])
		}
	}
	slices.Sort(mods)
	return path, mods
}
