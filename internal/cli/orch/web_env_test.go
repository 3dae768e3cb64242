package orch

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/httpauth"
)

// TestServeWebToken_NotInherited: serve reads the web view's AGORA_HTTP_TOKEN once, when
// its flags are checked, and removes it from its environment whatever its flags, as agora mcp
// does. The in-cluster manifests hand serve that token as environment (a Secret's reference),
// and every process serve starts inherits its environment (a dispatch's detached supervisor is
// started with os.Environ()): before, each carried the operator's token for as long as it ran.
// Without --http too (a manifest edited to drop --http, the env kept): b59221b
// removed it only with --http.
func TestServeWebToken_NotInherited(t *testing.T) {
	for name, http := range map[string]string{"with --http": "127.0.0.1:0", "without --http": ""} {
		t.Run(name, func(t *testing.T) {
			tok := strings.Repeat("ab", 32)
			t.Setenv(httpauth.EnvToken, tok)
			t.Setenv("AGORA_HOME", t.TempDir())
			o := &orchWebFlags{http: http}
			if err := o.check(&cobra.Command{}, &cmdutil.Factory{Getenv: os.Getenv}); err != nil {
				t.Fatal(err)
			}
			if http != "" && (len(o.clients) != 1 || o.clients[0].Token != tok) {
				t.Fatalf("the web view's clients %d, want the one token read", len(o.clients))
			}
			if _, ok := os.LookupEnv(httpauth.EnvToken); ok {
				t.Errorf("serve keeps %s in its environment after reading it", httpauth.EnvToken)
			}
			out, err := exec.Command("sh", "-c", "printenv "+httpauth.EnvToken+" || true").Output()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), tok) {
				t.Errorf("a process serve starts inherits the web view's token")
			}
		})
	}
}

// TestServeWebOIDCSecret_NotInherited: AGORA_OIDC_CLIENT_SECRET, the web view's client secret
// at the identity provider, leaves serve's environment when its flags are checked, as
// AGORA_HTTP_TOKEN does and for the same reason: every process serve starts (a dispatch's
// detached supervisor) inherits that environment, and none of them needs the secret.
func TestServeWebOIDCSecret_NotInherited(t *testing.T) {
	for name, http := range map[string]string{"with --http": "127.0.0.1:0", "without --http": ""} {
		t.Run(name, func(t *testing.T) {
			const secret = "oidc-client-secret-0123456789abcdef"
			t.Setenv(envOIDCClientSecret, secret)
			t.Setenv(httpauth.EnvToken, strings.Repeat("ab", 32))
			t.Setenv("AGORA_HOME", t.TempDir())
			o := &orchWebFlags{http: http}
			if err := o.check(&cobra.Command{}, &cmdutil.Factory{Getenv: os.Getenv}); err != nil {
				t.Fatal(err)
			}
			if _, ok := os.LookupEnv(envOIDCClientSecret); ok {
				t.Errorf("serve keeps %s in its environment after its flags are checked", envOIDCClientSecret)
			}
			out, err := exec.Command("sh", "-c", "printenv "+envOIDCClientSecret+" || true").Output()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("a process serve starts inherits the web view's client secret")
			}
		})
	}
}
