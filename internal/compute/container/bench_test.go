package container

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// BenchmarkProvider_NoOp is one container from create to removal for a no-op program, with
// every hardening option, through the Docker API.
func BenchmarkProvider_NoOp(b *testing.B) {
	engine(b)
	p := newTestProvider(b, Options{})
	for b.Loop() {
		id := testID(b)
		s := compute.Spec{ID: id, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, RunAs: testUser(id)}
		h, err := p.Start(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		if exit, err := h.Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
	}
}

// BenchmarkProvider_NoOpSecret adds the fdpass path: the secret on stdin, moved to fd 3.
func BenchmarkProvider_NoOpSecret(b *testing.B) {
	engine(b)
	p := newTestProvider(b, Options{})
	for b.Loop() {
		r, _ := pipeWith(b, `{"K":"v"}`)
		id := testID(b)
		s := compute.Spec{ID: id, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, RunAs: testUser(id),
			Binds: []compute.Bind{selfBind(b)}, Files: []*os.File{r}}
		h, err := p.Start(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		if exit, err := h.Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
	}
}

// BenchmarkPodmanRun is the baseline: `podman run --rm` of the same image and program with
// the same hardening flags, through the podman CLI.
func BenchmarkPodmanRun(b *testing.B) {
	engine(b)
	img := toolchainImage(b)
	if _, err := exec.LookPath("podman"); err != nil {
		b.Skip("SKIP: no podman CLI")
	}
	for b.Loop() {
		out, err := exec.Command("podman", "run", "--rm", "--read-only", "--cap-drop=ALL",
			"--security-opt=no-new-privileges", "--network=none", "--user=65534:65534",
			"--pids-limit=256", "--memory=4g", "--memory-swap=4g", img, "/bin/true").CombinedOutput()
		if err != nil {
			b.Fatalf("podman run: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
}
