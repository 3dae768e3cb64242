package dispatch

import (
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestWarm_NoTemplateWithProxyToken: a cold dispatch whose sandbox holds its egress proxy
// token never becomes a warm template: the next slots would start with that dispatch's
// credential in their environment.
func TestWarm_NoTemplateWithProxyToken(t *testing.T) {
	w := &WarmPools{d: &Dispatcher{StateDir: t.TempDir()}, tmpl: map[string]compute.Spec{}}
	tg := config.Target{Provider: config.ProviderLocal, Sandbox: compute.SandboxBwrap, Warm: 1}
	w.learn("local", tg, compute.Spec{Argv: []string{"w"}, Env: []string{"PATH=/bin", wire.ProxyTokenEnv + "=tok-secret"}})
	if _, ok := w.tmpl["local"]; ok || len(w.pools) != 0 {
		t.Fatalf("a spec holding a proxy token became a template: %+v", w.tmpl)
	}
}
