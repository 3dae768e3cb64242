package dispatchcmd

import (
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestSandboxShown: the accepted line names the sandbox a target's provider makes, not
// agora.yaml's word "bwrap" for every isolating target (a docker dispatch said "sandbox bwrap").
func TestSandboxShown(t *testing.T) {
	const pin = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	src := "gateway: {advertise: https://10.0.0.5:8443}\ntargets:\n" +
		"  d: {provider: docker, image: team/tool" + pin + "}\n" +
		"  k: {provider: kubernetes, image: team/tool" + pin + ", worker_image: w" + pin + ", namespace: a}\n" +
		"  s: {provider: kubernetes, backend: agent-sandbox, image: team/tool" + pin + ", worker_image: w" + pin + ", namespace: a}\n" +
		"  open: {sandbox: none}\n"
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte(src), c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ target, sandbox, want string }{
		{"local", "bwrap", "bwrap"},
		{"open", "none", "none"},
		{"d", "bwrap", "container"},
		{"k", "bwrap", "pod"},
		{"s", "bwrap", "pod of an agent-sandbox Sandbox"},
		{"gone", "bwrap", "bwrap"}, // a target removed since: the record's own word
	} {
		r := &dispatch.Record{Target: tc.target, Sandbox: tc.sandbox}
		if got := sandboxShown(c, r); got != tc.want {
			t.Errorf("target %s: sandbox shown %q, want %q", tc.target, got, tc.want)
		}
	}
}
