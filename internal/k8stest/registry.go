package k8stest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest/nodeparse"
)

// Registry is a real OCI registry (the CNCF distribution registry, built by
// scripts/registry-tools.sh) serving the real node: TLS from a CA of its own that the node's
// containerd trusts through its hosts directory (certs.d), and htpasswd auth with one user.
// It listens on RealNodeIP, so image references name it as a registry elsewhere would be
// named (Host/REPO@sha256:...), not as localhost, which containerd treats specially.
type Registry struct {
	// Host is HOST:PORT, the registry part of an image reference.
	Host string
	// User and Password are the one account htpasswd holds.
	User, Password string
	// CAPEM is the CA the registry's certificate is signed by.
	CAPEM []byte

	c       *Cluster
	dir     string // config, certificates, the authfile podman pushes with
	certDir string // podman's --cert-dir: ca.crt
	proc    *proc
}

// StartRegistry starts a registry for t on the cluster's real node and stops it when t
// ends; it skips t when the registry binary is absent (scripts/registry-tools.sh builds it)
// and fails it when the registry does not come up.
func (c *Cluster) StartRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := c.startRegistry(t.TempDir())
	if err != nil {
		var skip *skipError
		if errors.As(err, &skip) {
			t.Skip(skip.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(r.proc.kill)
	t.Logf("k8stest: registry up at %s", r.Host)
	return r
}

func (c *Cluster) startRegistry(dir string) (*Registry, error) {
	if c.containerdSock == "" {
		return nil, errors.New("start a registry: the cluster has no real node (Options.RealNode) to pull from it")
	}
	bin, htpasswd, err := registryBinaries()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: net.JoinHostPort(RealNodeIP, strconv.Itoa(ports[0])), User: "agora-ci",
		Password: randomHex(16), c: c, dir: dir, certDir: filepath.Join(dir, "podman-certs")}
	p, err := newPKI(dir)
	if err != nil {
		return nil, err
	}
	r.CAPEM = p.caPEM
	serving, err := p.serving("registry", []net.IP{net.ParseIP(RealNodeIP)})
	if err != nil {
		return nil, err
	}
	htpasswdFile := filepath.Join(dir, "htpasswd")
	if err := r.writeHtpasswd(htpasswd, htpasswdFile); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(registryConfig(r.Host, filepath.Join(dir, "storage"), serving, htpasswdFile)), 0o600); err != nil {
		return nil, fmt.Errorf("write the registry config: %w", err)
	}
	if err := c.trustRegistry(r.Host, p.caFile()); err != nil {
		return nil, err
	}
	if err := r.writePodmanFiles(p.caPEM); err != nil {
		return nil, err
	}
	r.proc = newProc(dir, "registry", []string{bin, "serve", cfg})
	if err := r.proc.start(); err != nil {
		return nil, err
	}
	if err := r.waitReady(); err != nil {
		r.proc.kill()
		return nil, err
	}
	return r, nil
}

// registryBinaries finds the registry and its htpasswd line maker in .cache/registry/bin.
func registryBinaries() (registry, htpasswd string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	bin := filepath.Join(root, ".cache", "registry", "bin")
	registry, htpasswd = filepath.Join(bin, "registry"), filepath.Join(bin, "registry-htpasswd")
	for _, b := range []string{registry, htpasswd} {
		if !fileExists(b) {
			return "", "", &skipError{b + " is missing: run scripts/registry-tools.sh (make registry-tools)"}
		}
	}
	return registry, htpasswd, nil
}

// registryConfig is the registry's configuration: TLS, htpasswd, storage on disk, no
// access log (a pull's lines would bury a failure's).
func registryConfig(addr, storage string, serving *identity, htpasswd string) string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog: {disabled: true}
storage:
  filesystem: {rootdirectory: %q}
http:
  addr: %q
  secret: %q
  tls: {certificate: %q, key: %q}
auth:
  htpasswd: {realm: agora-k8stest, path: %q}
`, storage, addr, randomHex(16), serving.certFile, serving.keyFile, htpasswd)
}

// writeHtpasswd writes the one account's line; the password reaches the hasher on stdin.
func (r *Registry) writeHtpasswd(htpasswd, file string) error {
	cmd := exec.Command(htpasswd, r.User)
	cmd.Stdin = strings.NewReader(r.Password + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	line, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("registry-htpasswd: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := os.WriteFile(file, line, 0o600); err != nil {
		return fmt.Errorf("write the registry's htpasswd: %w", err)
	}
	return nil
}

// trustRegistry makes the node's containerd trust the registry's CA for host: a hosts.toml
// in the hosts directory its CRI plugin reads at each pull (config_path), so a registry
// started after the node needs no restart. Nothing else is trusted: no skip_verify, and only
// this host's directory names the CA.
func (c *Cluster) trustRegistry(host, caFile string) error {
	d := filepath.Join(c.certsDir(), host)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("make the containerd hosts directory: %w", err)
	}
	toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n",
		"https://"+host, "https://"+host, caFile)
	if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(toml), 0o600); err != nil {
		return fmt.Errorf("write the containerd hosts.toml: %w", err)
	}
	return nil
}

// Distrust removes the registry's hosts.toml from the node's containerd, which then knows no
// CA for it: a test that a pull is refused, not done without verification, when the node does
// not trust the registry.
func (r *Registry) Distrust() error {
	if err := os.RemoveAll(filepath.Join(r.c.certsDir(), r.Host)); err != nil {
		return fmt.Errorf("remove the registry's hosts.toml: %w", err)
	}
	return nil
}

// certsDir is the real node's containerd hosts directory (its CRI registry config_path).
func (c *Cluster) certsDir() string { return filepath.Join(c.Dir, "containerd", "certs.d") }

// writePodmanFiles writes what podman pushes with: the CA (--cert-dir) and the credential
// (--authfile, in the containers-auth.json form), so the password never reaches argv.
func (r *Registry) writePodmanFiles(caPEM []byte) error {
	if err := os.MkdirAll(r.certDir, 0o700); err != nil {
		return fmt.Errorf("make podman's cert directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.certDir, "ca.crt"), caPEM, 0o600); err != nil {
		return fmt.Errorf("write podman's CA: %w", err)
	}
	if err := os.WriteFile(r.authFile(), r.DockerConfigJSON(r.User, r.Password), 0o600); err != nil {
		return fmt.Errorf("write podman's authfile: %w", err)
	}
	return nil
}

func (r *Registry) authFile() string { return filepath.Join(r.dir, "auth.json") }

// DockerConfigJSON is a .dockerconfigjson for this registry with user and password: the data
// of a kubernetes.io/dockerconfigjson Secret, and podman's authfile.
func (r *Registry) DockerConfigJSON(user, password string) []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	return b
}

// PullSecret is a kubernetes.io/dockerconfigjson Secret ns/name holding user and password for
// this registry, as `kubectl create secret docker-registry` makes it.
func (r *Registry) PullSecret(ns, name, user, password string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string][]byte{".dockerconfigjson": r.DockerConfigJSON(user, password)},
	}
}

// waitReady waits for the registry's API to answer an authenticated GET /v2/.
func (r *Registry) waitReady() error {
	client := r.client()
	client.Timeout = 2 * time.Second
	defer client.CloseIdleConnections()
	check := func() error {
		if done, err := r.proc.exited(); done {
			return fmt.Errorf("registry exited: %v\n%s", err, r.proc.tail())
		}
		return nil
	}
	return waitFor(30*time.Second, 50*time.Millisecond, "registry", check, func() (bool, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+r.Host+"/v2/", nil)
		req.SetBasicAuth(r.User, r.Password)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// PushPodman pushes podman's image src (a digest suffix is dropped) to REGISTRY/repo:tag
// and returns the pushed reference pinned by the manifest digest the registry holds
// (Host/repo@sha256:...), the form agora's targets require.
func (r *Registry) PushPodman(ctx context.Context, src, repo, tag string) (string, error) {
	name, _, _ := strings.Cut(src, "@")
	dst := r.Host + "/" + repo + ":" + tag
	digestFile := filepath.Join(r.dir, "digest-"+randomHex(4))
	defer os.Remove(digestFile)
	cmd := exec.CommandContext(ctx, "podman", "push", "-q", "--authfile", r.authFile(), "--cert-dir", r.certDir,
		"--digestfile", digestFile, name, "docker://"+dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("podman push %s %s: %w: %s", name, dst, err, bytes.TrimSpace(out))
	}
	d, err := os.ReadFile(digestFile)
	if err != nil {
		return "", fmt.Errorf("podman push %s: read the digest: %w", dst, err)
	}
	if digest := strings.TrimSpace(string(d)); nodeparse.IsDigest(digest) {
		return r.Host + "/" + repo + "@" + digest, nil
	}
	return "", fmt.Errorf("podman push %s: digest file holds %q", dst, d)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
