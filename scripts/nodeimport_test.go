package scripts_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestNodeImport: scripts/node-import.sh imports an image archive into a containerd (a real
// one, started here in a directory of its own) and prints REPOSITORY@DIGEST with the digest
// containerd holds, under which the image is now also named, as the kubelet asks for a
// digest-pinned pod's image; a second import of the same archive prints the same reference.
func TestNodeImport(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP: needs root to run a containerd")
	}
	for _, bin := range []string{"containerd", "ctr"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIP: %s is missing (scripts/k8s-node.sh installs it): %v", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "ctrd") // short: the socket's path must fit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "version = 2\nroot = %q\nstate = %q\n[grpc]\n  address = %q\n", dir+"/root", dir+"/state", sock), 0o600); err != nil {
		t.Fatal(err)
	}
	ctrd := exec.Command("containerd", "--config", cfg)
	var logs bytes.Buffer
	ctrd.Stdout, ctrd.Stderr = &logs, &logs
	if err := ctrd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrd.Process.Kill(); ctrd.Wait() })
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := exec.Command("ctr", "--address", sock, "version").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer within 30s:\n%s", logs.String())
		}
	}
	archive := filepath.Join(dir, "x.tar")
	if err := os.WriteFile(archive, dockerArchive(t, "localhost/agora-x:v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		t.Helper()
		cmd := exec.Command("./node-import.sh", archive)
		cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node-import.sh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ref := run()
	if !regexp.MustCompile(`^localhost/agora-x@sha256:[0-9a-f]{64}$`).MatchString(ref) {
		t.Fatalf("node-import.sh printed %q, want localhost/agora-x@sha256:<64 hex>", ref)
	}
	digest := strings.TrimPrefix(ref, "localhost/agora-x@")
	listed := ctr("images", "ls")
	for _, name := range []string{"localhost/agora-x:v1", ref} {
		found := false
		for _, line := range strings.Split(listed, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == name && f[2] == digest {
				found = true
			}
		}
		if !found {
			t.Errorf("containerd does not hold %s at %s:\n%s", name, digest, listed)
		}
	}
	if again := run(); again != ref {
		t.Errorf("a second import printed %q, want %q", again, ref)
	}
	if out, err := exec.Command("./node-import.sh").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage") {
		t.Errorf("no archive: %v %s", err, out)
	}
}

// dockerArchive is a docker-archive (as `podman save --format docker-archive` writes) of a
// one-layer image named name, its layer one file.
func dockerArchive(t *testing.T, name string) []byte {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	lw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: 3})
	lw.Write([]byte("hi\n"))
	lw.Close()
	sum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	config := fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[%q]}}`, diffID)
	csum := sha256.Sum256([]byte(config))
	cname := hex.EncodeToString(csum[:]) + ".json"
	manifest := fmt.Sprintf(`[{"Config":%q,"RepoTags":[%q],"Layers":["layer.tar"]}]`, cname, name)
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		body []byte
	}{{"layer.tar", layer.Bytes()}, {cname, []byte(config)}, {"manifest.json", []byte(manifest)}} {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		w.Write(f.body)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
