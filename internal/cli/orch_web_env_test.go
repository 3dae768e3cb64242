package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestServeWebToken_NotInherited (#31): serve reads the web view's AGORA_HTTP_TOKEN once, when
// its flags are checked, and removes it from its environment, as agora mcp does. The
// in-cluster manifests hand serve that token as environment (a Secret's reference), and every
// process serve starts inherits its environment (a dispatch's detached supervisor is started
// with os.Environ()): before, each carried the operator's token for as long as it ran.
func TestServeWebToken_NotInherited(t *testing.T) {
	tok := strings.Repeat("ab", 32)
	t.Setenv(envHTTPToken, tok)
	f := &Factory{Getenv: os.Getenv}
	t.Setenv("AGORA_HOME", t.TempDir())
	o := &orchWebFlags{http: "127.0.0.1:0"}
	if err := o.check(&cobra.Command{}, f); err != nil {
		t.Fatal(err)
	}
	if len(o.clients) != 1 || o.clients[0].Token != tok {
		t.Fatalf("the web view's clients %d, want the one token read", len(o.clients))
	}
	if _, ok := os.LookupEnv(envHTTPToken); ok {
		t.Errorf("serve keeps %s in its environment after reading it", envHTTPToken)
	}
	out, err := exec.Command("sh", "-c", "printenv "+envHTTPToken+" || true").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tok) {
		t.Errorf("a process serve starts inherits the web view's token")
	}
}
