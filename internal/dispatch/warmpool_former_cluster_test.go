package dispatch

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
)

var formerPoolTarget = config.Target{Provider: config.ProviderKubernetes, Warm: 1,
	Remote: config.Remote{WarmPool: new(true), Backend: config.BackendAgentSandbox}}

// Across the home-identity change (k8sHomes): an older agora of this home on host-a
// left a pool under the former identity (its holder killed with -9) and a claim of it; another
// home in the namespace has pools under both its identities. This home's upgraded agora, on
// the kwok control plane with agent-sandbox's CRDs and controller:
//   - its gateway's verifier asks for the former audience too (PoolVerifier: the pods of that
//     pool enrol; the kubernetes package's tests hold what it accepts);
//   - its adoption of the claimed dispatch opens the former identity's pool the claim names
//     (adoptPooled: without the former identity the claim is of another pool than the current
//     one and refused), and the other home's adoption takes nothing;
//   - its keeper's sweep deletes the former identity's pool and neither its current pool (a
//     holder of the home may hold it) nor either of the other home's.
func TestWarmPool_FormerIdentityPoolsAdoptedAndSwept(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{AgentSandbox: true})
	ctx := t.Context()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(t.TempDir(), "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pin := "@sha256:" + strings.Repeat("ab", 32)
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: c.Kubeconfig, Namespace: c.Namespace,
		Image: "registry.example/agents/toolchain" + pin, WorkerImage: "registry.example/agora/worker" + pin,
		CPU: "500m", Memory: "256Mi", GatewayURL: "https://10.250.0.1:8443", GatewayCA: certs.CAPEM,
		Exporter: &netgw.Registry{Dir: filepath.Join(t.TempDir(), "sessions")}, Target: "pool", Backend: kubernetes.BackendAgentSandbox})
	if err != nil {
		t.Fatal(err)
	}
	homeOf := func(host string) *Dispatcher {
		dir := filepath.Join(t.TempDir(), "agora")
		initHome(t, dir)
		return &Dispatcher{StateDir: filepath.Join(dir, "dispatches"), testOnlyHostname: host, testOnlyInvokingUser: true,
			Config:          &config.Config{Targets: map[string]config.Target{"pool": formerPoolTarget}},
			RemoteProviders: func(context.Context, string, config.Target) (compute.Provider, error) { return p, nil }}
	}
	d, other := homeOf("host-a"), homeOf("host-a")
	ids, oids := homesOf(t, d), homesOf(t, other)
	if len(ids.former) != 1 || len(oids.former) != 1 {
		t.Fatalf("former identities %v, %v; want one each", ids.former, oids.former)
	}

	tmpl := k8sHomeSpec(t, "TEMPLATE")
	pools := map[string]*kubernetes.Pool{}
	for what, home := range map[string]string{"former": ids.former[0], "current": ids.current, "other": oids.current, "other former": oids.former[0]} {
		o := kubernetes.PoolOptions{Home: home, Places: kubernetes.Places(tmpl)}
		pl, err := p.EnsurePool(ctx, tmpl, o)
		if err != nil {
			t.Fatalf("make the %s pool: %v", what, err)
		}
		t.Cleanup(func() { _ = pl.Delete(context.Background()) })
		pools[what] = pl
	}

	// The gateway's verifier: the current identity and the former one, of this home alone.
	v, err := d.PoolVerifier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, ok := v.(poolVerifiers)
	var pv kubernetes.PoolVerifier
	if ok && len(vs) == 1 {
		pv, _ = vs[0].(kubernetes.PoolVerifier)
	}
	if !ok || len(vs) != 1 || pv.Home != ids.current || !slices.Equal(pv.Former, ids.former) {
		t.Errorf("PoolVerifier = %#v; want one verifier of home %s, former %v", v, ids.current, ids.former)
	}

	// A claim the older agora made for a dispatch of the former pool, before its supervisor
	// died (the controller hands it no Sandbox the dispatch was bound to: the pool has none).
	id := "POOLFORMERD1"
	claim := map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "agora-" + strings.ToLower(id), "namespace": c.Namespace,
			"labels": map[string]any{"app.kubernetes.io/managed-by": "agora", "agora.dispatch": id, "agora.pool": pools["former"].Name}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": pools["former"].Name}}}
	if err := c.Do(ctx, http.MethodPost, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/"+c.Namespace+"/sandboxclaims", claim, nil); err != nil {
		t.Fatalf("make the older agora's claim: %v", err)
	}
	spec := k8sHomeSpec(t, id)
	adopt := func(d *Dispatcher) (compute.Handle, error) {
		s := &supervision{d: d, r: &Record{ID: id, Target: "pool"}, target: formerPoolTarget, spec: spec}
		return s.adoptPooled(ctx)
	}
	if h, err := adopt(d); h != nil || err != nil {
		t.Errorf("this home's adoption of its former identity's claim = %v, %v; want the former pool opened and the dispatch found never bound (nil, nil)", h, err)
	}
	if h, err := adopt(other); h != nil || err == nil {
		t.Errorf("another home's adoption of the claim = %v, %v; want refused (the claim is of no pool of its)", h, err)
	}

	// The keeper's sweep, holding nothing.
	k := &PoolKeeper{d: d, warmers: map[string]compute.PoolWarmer{}}
	k.sweep(ctx, []string{"pool"})
	stands := func(pl *kubernetes.Pool) bool {
		t.Helper()
		var tm struct {
			Metadata struct{ DeletionTimestamp *string }
		}
		err := c.Do(ctx, http.MethodGet, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/"+c.Namespace+"/sandboxtemplates/"+pl.Name, nil, &tm)
		var st *k8stest.StatusError
		if errors.As(err, &st) && st.Code == http.StatusNotFound {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return tm.Metadata.DeletionTimestamp == nil
	}
	if stands(pools["former"]) {
		t.Error("the sweep left the pool an older agora of this home made under its former identity")
	}
	for _, what := range []string{"current", "other", "other former"} {
		if !stands(pools[what]) {
			t.Errorf("this home's sweep deleted the %s pool", what)
		}
	}
}
