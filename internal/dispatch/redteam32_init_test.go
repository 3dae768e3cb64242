package dispatch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestRedTeam32_StartOpensAndDialsNothing: the worker (what every sandbox and
// claude's hook start) and the agora a supervisor or one-shot command starts open no file but
// the Go runtime's own before they do their command's work, and connect nowhere, even with the
// variables a caller, a sandbox or a hook could set: a tracing endpoint (OTLP over HTTP and
// over gRPC), a trace parent, a proxy. Traced with strace; what main itself reads (the
// binary, for its version) is listed.
func TestRedTeam32_StartOpensAndDialsNothing(t *testing.T) {
	strace := requireTool(t, "strace")
	home := t.TempDir()
	runtimeFiles := []string{"/sys/kernel/mm/transparent_hugepage/", "/proc/self/cgroup", "/proc/self/mountinfo", "/sys/fs/cgroup/"}
	for _, c := range []struct {
		bin  string
		args []string
		own  []string // what main reads
	}{
		{agoratest.Worker(agoraBin), []string{"--help"}, nil},
		{agoraBin, []string{"version"}, []string{agoraBin}},
		{agoraBin, []string{"dispatch", "--help"}, []string{agoraBin}},
	} {
		for _, proto := range []string{"http/protobuf", "grpc"} {
			out := filepath.Join(t.TempDir(), "trace")
			cmd := exec.CommandContext(t.Context(), strace, append([]string{"-f", "-qq", "-e", "trace=open,openat,connect,socket", "-o", out, c.bin}, c.args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "AGORA_HOME=" + home,
				"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL=" + proto,
				"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
			_ = cmd.Run() // --help exits 2 in the worker; the trace is what is judged
			b, err := os.ReadFile(out)
			if err != nil || len(b) == 0 {
				t.Fatalf("strace %s %v wrote no trace: %v", c.bin, c.args, err)
			}
			opened := 0
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				// A call strace saw interrupted by another thread's is two lines: "openat(..." with
				// "<unfinished ...>" (judged: it names the path) and "<... openat resumed>" (only the
				// result: under load one reads as "an open").
				if strings.Contains(l, "+++") || strings.Contains(l, "---") || strings.Contains(l, " resumed>") {
					continue
				}
				switch {
				case strings.Contains(l, "connect(") || strings.Contains(l, "socket("):
					t.Errorf("%s %v (OTLP %s) dials at start: %s", filepath.Base(c.bin), c.args, proto, l)
				case strings.Contains(l, "open"):
					opened++
					ok := false
					for _, p := range append(append([]string{}, runtimeFiles...), c.own...) {
						ok = ok || strings.Contains(l, `"`+p)
					}
					if !ok {
						t.Errorf("%s %v (OTLP %s) opens at start: %s", filepath.Base(c.bin), c.args, proto, l)
					}
				}
			}
			if opened == 0 {
				t.Fatalf("the trace of %s %v shows no open at all (not even the runtime's): %q", c.bin, c.args, b)
			}
		}
	}
}
