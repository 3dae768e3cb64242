package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestRedTeam33_EngineProbeNamesNoCredential: doctor's engine probe of a kubernetes target
// names the API server it asked, never a credential of the kubeconfig: neither the user's
// token nor a password in the server's URL (https://USER:PASSWORD@HOST, which Go's client
// sends as basic auth; its own error already prints it as ***). Failed before: the probe's
// message began "the API server at https://admin:KUBEPW-SECRET@127.0.0.1:1".
func TestRedTeam33_EngineProbeNamesNoCredential(t *testing.T) {
	for name, user := range map[string]string{
		"token":      "{token: TOKEN-SECRET}",
		"basic auth": "{username: bob, password: BASICPW-SECRET}",
	} {
		t.Run(name, func(t *testing.T) {
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://admin:KUBEPW-SECRET@127.0.0.1:1"}}]
users: [{name: u, user: `+user+`}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
				t.Fatal(err)
			}
			pods := config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Kubeconfig: kc, Namespace: "agents"}}
			detail, err := probeEngine(t.Context(), pods)
			if err == nil {
				t.Fatalf("kubernetes probe of a server that is not listening = %q, want an error", detail)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the probe's error prints a credential of the kubeconfig: %v", err)
			}
			if !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("the probe's error does not name the API server: %v", err)
			}
		})
	}
}
