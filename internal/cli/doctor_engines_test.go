package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestProbeEngine_Unreachable: the engine probe doctor runs answers with the engine's own
// error for a docker target whose socket does not exist and a kubernetes target whose API
// server is not listening, never "ok" (doctor said "config ok" without asking).
func TestProbeEngine_Unreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	box := config.Target{Provider: config.ProviderDocker, Remote: config.Remote{
		DockerHost: "unix://" + sock,
		Image:      "agora-toolchain:test@sha256:" + strings.Repeat("a", 64),
	}}
	if detail, err := probeEngine(t.Context(), box); err == nil || !strings.Contains(err.Error(), sock) {
		t.Errorf("docker probe = %q, %v; want an error naming the socket %s", detail, err, sock)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pods := config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Kubeconfig: kc, Namespace: "agents"}}
	detail, err := probeEngine(t.Context(), pods)
	if err == nil || !strings.Contains(err.Error(), "https://127.0.0.1:1") || !strings.Contains(err.Error(), `namespace "agents"`) {
		t.Errorf("kubernetes probe = %q, %v; want an error naming the API server and the namespace", detail, err)
	}
	if err != nil && strings.Contains(err.Error(), "not-a-secret") {
		t.Errorf("the probe's error prints the kubeconfig's token: %v", err)
	}
}
