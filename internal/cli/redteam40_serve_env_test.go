package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestRedTeam40_ServeWithoutHTTPDropsToken: red team of b59221b (#31). serve removed
// AGORA_HTTP_TOKEN from its environment only when --http was given, so a serve started with
// the token in its environment and no web view (a manifest edited to drop --http, a chart
// rendering with the env kept) handed the operator's token to every detached supervisor it
// started. agora mcp removes it whatever its flags; serve now does too.
func TestRedTeam40_ServeWithoutHTTPDropsToken(t *testing.T) {
	tok := strings.Repeat("cd", 32)
	t.Setenv(envHTTPToken, tok)
	o := &orchWebFlags{}
	if err := o.check(&cobra.Command{}, &Factory{Getenv: os.Getenv}); err != nil {
		t.Fatal(err)
	}
	if _, ok := os.LookupEnv(envHTTPToken); ok {
		t.Errorf("serve without --http keeps %s in its environment", envHTTPToken)
	}
	out, err := exec.Command("sh", "-c", "printenv "+envHTTPToken+" || true").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tok) {
		t.Errorf("a process serve starts without --http inherits the web view's token")
	}
}
