package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The two images a kubernetes target's pod runs, for a real node: agora's worker image, made
// from the binary under test, and the toolchain image, made by scripts/images.sh with podman.

// ImportAgoraWorker makes agora's worker image from the worker program at bin (FROM scratch,
// cmd/agora-worker at /agora/bin/agora-worker, as images/agora-worker.Containerfile builds it), imports it into
// the node's containerd and returns its digest-pinned reference: the pod runs the code under
// test.
func (c *Cluster) ImportAgoraWorker(ctx context.Context, bin string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	tarball, _, err := OCIImage("localhost/agora-worker:e2e", []string{"/agora/bin/agora-worker"},
		ImageFile{Path: "/agora/bin/agora-worker", Mode: 0o755, Data: b})
	if err != nil {
		return "", err
	}
	return c.importOne(ctx, tarball)
}

// ImportPodmanImage saves podman's image ref (its name; a digest suffix is dropped) and
// imports it into the node's containerd, returning the digest-pinned reference containerd
// holds, which for a `podman save` archive differs from podman's own digest.
func (c *Cluster) ImportPodmanImage(ctx context.Context, ref string) (string, error) {
	name, _, _ := strings.Cut(ref, "@")
	saved, err := exec.CommandContext(ctx, "podman", "save", "-q", "--format", "docker-archive", "-o", "/dev/stdout", name).Output()
	if err != nil {
		return "", fmt.Errorf("podman save %s: %w", name, err)
	}
	return c.importOne(ctx, saved)
}

func (c *Cluster) importOne(ctx context.Context, tarball []byte) (string, error) {
	refs, err := c.ImportImage(ctx, tarball)
	if err != nil {
		return "", err
	}
	if len(refs) != 1 {
		return "", fmt.Errorf("imported %q, want one image", refs)
	}
	return refs[0], nil
}

var toolchain struct {
	once sync.Once
	ref  string
	err  error
}

// ToolchainImage returns podman's reference of the toolchain image (git and busybox, what a
// pod's worker runs in): $AGORA_TOOLCHAIN_IMAGE, else what `scripts/images.sh toolchain`
// builds or finds. It skips t, saying why, when podman or the image is not there.
func ToolchainImage(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("SKIP: podman is missing (it builds and saves the toolchain image): run scripts/podman.sh")
	}
	toolchain.once.Do(func() {
		if ref := os.Getenv("AGORA_TOOLCHAIN_IMAGE"); ref != "" {
			toolchain.ref = ref
			return
		}
		root, err := moduleRoot()
		if err != nil {
			toolchain.err = err
			return
		}
		out, err := exec.Command(filepath.Join(root, "scripts", "images.sh"), "toolchain").Output()
		if err != nil {
			toolchain.err = fmt.Errorf("scripts/images.sh toolchain: %w", err)
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "AGORA_TOOLCHAIN_IMAGE="); ok {
				toolchain.ref = v
			}
		}
	})
	if toolchain.ref == "" {
		t.Skipf("SKIP: no toolchain image (%v): run scripts/images.sh toolchain (or set AGORA_TOOLCHAIN_IMAGE)", toolchain.err)
	}
	return toolchain.ref
}

// moduleRoot is the directory of the go.mod above the working directory (a test's package).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
