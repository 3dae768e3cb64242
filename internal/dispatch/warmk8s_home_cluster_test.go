package dispatch

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
)

// k8sHomeCluster is a kwok control plane and what the providers of every "host" share: the
// gateway's CA and the sessions directory (standing in for agora.db's stored sessions, which a
// standby restores with the home).
type k8sHomeCluster struct {
	c        *k8stest.Cluster
	ca       []byte
	sessions string
}

func startK8sHomeCluster(t *testing.T) *k8sHomeCluster {
	t.Helper()
	c := k8stest.Start(t, k8stest.Options{})
	certs, err := netgw.LoadOrCreateCA(filepath.Join(t.TempDir(), "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &k8sHomeCluster{c: c, ca: certs.CAPEM, sessions: filepath.Join(t.TempDir(), "sessions")}
}

// provider is one host's provider of target "k8s" (each host its own, as each replica's
// process has).
func (k *k8sHomeCluster) provider(t *testing.T) *kubernetes.Provider {
	t.Helper()
	pin := "@sha256:" + strings.Repeat("ab", 32)
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: k.c.Kubeconfig, Namespace: k.c.Namespace,
		Image: "registry.example/agents/toolchain" + pin, WorkerImage: "registry.example/agora/worker" + pin,
		CPU: "500m", Memory: "256Mi", GatewayURL: "https://10.250.0.1:8443", GatewayCA: k.ca,
		Exporter: &netgw.Registry{Dir: k.sessions}, Target: "k8s"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dispatcher makes d a Dispatcher of target "k8s" (warm: 1) on p, as serve builds it.
func (k *k8sHomeCluster) dispatcher(d *Dispatcher, p *kubernetes.Provider) *Dispatcher {
	d.Config = &config.Config{Targets: map[string]config.Target{"k8s": k8sHomeTarget}}
	d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) { return p, nil }
	return d
}

var k8sHomeTarget = config.Target{Provider: config.ProviderKubernetes, Warm: 1}

// k8sHomeSpec is a dispatch's spec whose binds the gateway exports, its one read-only place
// /agora/bundle (k8sHomePlaces).
func k8sHomeSpec(t *testing.T, id string) compute.Spec {
	bundle, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "task.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return compute.Spec{
		ID:   id,
		Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "AGORA_DISPATCH_ID=" + id},
		Dir:  "/agora/workspace",
		Binds: []compute.Bind{
			{Src: "/usr/local/bin/agora", Dst: "/agora/bin/agora-worker"},
			{Src: bundle, Dst: "/agora/bundle"},
			{Src: out, Dst: "/agora/out", Writable: true, Result: true},
		},
		Limits: compute.Limits{Timeout: 10 * time.Minute, Memory: 1 << 30, Scratch: 256 << 20},
	}
}

var k8sHomePlaces = []remote.SlotPlace{{Dst: "/agora/bundle"}}

// startSlotAs starts a waiting slot labelled home on p, its gateway slot in slots; the slot
// is discarded at the test's end (its watch stopped, its Job deleted if it stands).
func startSlotAs(t *testing.T, p *kubernetes.Provider, slots *netgw.Slots, home string) (*kubernetes.Slot, *netgw.Slot) {
	t.Helper()
	gs, err := slots.Create(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close() })
	sl, err := p.StartSlot(t.Context(), k8sHomeSpec(t, "TEMPLATE"), kubernetes.SlotOptions{ID: gs.ID, Token: gs.Token, Home: home, Places: k8sHomePlaces})
	if err != nil {
		t.Fatalf("start a slot of home %s: %v", home, err)
	}
	return sl, gs
}

// jobStands reports whether slot's Job stands and is not being deleted.
func (k *k8sHomeCluster) jobStands(t *testing.T, slot string) bool {
	t.Helper()
	var j struct {
		Metadata struct{ DeletionTimestamp *string }
	}
	err := k.c.Do(t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+k.c.Namespace+"/jobs/agora-"+strings.ToLower(slot), nil, &j)
	var st *k8stest.StatusError
	if errors.As(err, &st) && st.Code == http.StatusNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return j.Metadata.DeletionTimestamp == nil
}

// deleteJob deletes slot's Job (and, in the background, its pod), ending whoever follows it.
func (k *k8sHomeCluster) deleteJob(slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = k.c.Do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/"+k.c.Namespace+"/jobs/agora-"+strings.ToLower(slot)+"?propagationPolicy=Background", nil, nil)
}

// waitEnded waits (bounded) for h's follower to end, so no goroutine outlives the test.
func waitEnded(t *testing.T, what string, h compute.Handle) {
	t.Helper()
	done := make(chan struct{})
	go func() { h.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Errorf("%s still follows its Job 2m after it was deleted", what)
	}
}

// The home's leader on host-a claimed a warm slot for a dispatch and died; the
// standby that took over runs the same home (its audit key restored, at another path) on
// host-b. Its serve-side adoption (supervision.adoptSandbox: the provider's Adopt, then
// adoptSlotted) follows the slot's Job with the recorded task id, and its sweep deletes the
// dead leader's unclaimed slot and a slot an older agora of the standby's own host made under
// the former (host+path+key) identity, while the claimed slots stand; a slot that older agora
// claimed for a dispatch of the home is adopted too (the upgrade loses no dispatch). Another
// home in the same namespace (on host-a too) neither adopts a claimed slot nor sweeps any.
func TestK8sHome_StandbyOnAnotherHostAdoptsAndSweepsTheLeadersSlots(t *testing.T) {
	k := startK8sHomeCluster(t)
	ctx := t.Context()

	dirA := filepath.Join(t.TempDir(), "agora")
	initHome(t, dirA)
	pA := k.provider(t)
	leader := k.dispatcher(&Dispatcher{StateDir: filepath.Join(dirA, "dispatches"), testOnlyHostname: "host-a"}, pA)
	pB := k.provider(t)
	standby := k.dispatcher(replicaOf(t, dirA, "host-b"), pB)
	dirG := filepath.Join(t.TempDir(), "agora")
	initHome(t, dirG)
	pG := k.provider(t)
	other := k.dispatcher(&Dispatcher{StateDir: filepath.Join(dirG, "dispatches"), testOnlyHostname: "host-a"}, pG)
	if homeOf(t, leader) != homeOf(t, standby) || homeOf(t, leader) == homeOf(t, other) {
		t.Errorf("identities: leader %s, standby %s, other home %s", homeOf(t, leader), homeOf(t, standby), homeOf(t, other))
	}

	// The leader's claimed slot: its Job marked claimed by the dispatch, which the leader
	// followed until it died (its handle is kept only to see it end with the test).
	leaderSlots := leader.k8sSlots()
	claimed, claimedGW := startSlotAs(t, pA, leaderSlots, homeOf(t, leader))
	id := "K8SHOME" + strings.ToUpper(claimed.ID[1:9])
	spec := k8sHomeSpec(t, id)
	started := time.Now()
	first, err := claimed.Run(ctx, spec, func(context.Context, string, string) error { return nil })
	if err != nil {
		t.Fatalf("claim the leader's slot: %v", err)
	}
	task := first.TaskID()
	t.Cleanup(func() { waitEnded(t, "the dead leader's handle", first) })
	t.Cleanup(func() { k.deleteJob(claimed.ID) })
	claimedGW.Close() // the leader is gone: its gateway slot with it

	// The leader's unclaimed slot, and one an older agora on the standby's host made at the
	// standby's path (the former identity), neither held by any living holder.
	scratch := &netgw.Slots{Dir: filepath.Join(t.TempDir(), "slots")}
	idle, _ := startSlotAs(t, pA, scratch, homeOf(t, leader))
	t.Cleanup(idle.Discard)
	key, err := os.ReadFile(filepath.Join(dirA, home.AuditPubFile))
	if err != nil {
		t.Fatal(err)
	}
	former := hostPathK8sHome("host-b", filepath.Dir(standby.StateDir), key)
	if got := homesOf(t, standby).former; len(got) != 1 || got[0] != former {
		t.Errorf("the standby's former identity %q, want %q", got, former)
	}
	old, _ := startSlotAs(t, pA, scratch, former)
	t.Cleanup(old.Discard)
	// And a slot that older agora claimed for a dispatch of the home before the upgrade.
	formerClaimed, formerGW := startSlotAs(t, pA, scratch, former)
	formerID := "K8SHOME" + strings.ToUpper(formerClaimed.ID[1:9])
	formerSpec := k8sHomeSpec(t, formerID)
	formerFirst, err := formerClaimed.Run(ctx, formerSpec, func(context.Context, string, string) error { return nil })
	if err != nil {
		t.Fatalf("claim the former identity's slot: %v", err)
	}
	t.Cleanup(func() { waitEnded(t, "the older agora's handle", formerFirst) })
	t.Cleanup(func() { k.deleteJob(formerClaimed.ID) })
	formerGW.Close()

	// The dispatch as serve's reap hands it over: its record and spec.
	adoption := func(d *Dispatcher) *supervision {
		return &supervision{d: d, r: &Record{ID: id, Target: "k8s", ProviderTaskID: task, StartedAt: &started}, target: k8sHomeTarget, spec: spec}
	}
	formerAdoption := func(d *Dispatcher) *supervision {
		return &supervision{d: d, r: &Record{ID: formerID, Target: "k8s", ProviderTaskID: formerFirst.TaskID(), StartedAt: &started}, target: k8sHomeTarget, spec: formerSpec}
	}

	// Another home neither adopts nor sweeps.
	sg := adoption(other)
	if err := sg.adoptSandbox(ctx, pG); err == nil || !strings.Contains(err.Error(), "another home's slot") || sg.handle != nil {
		t.Errorf("another home's adoption of the dispatch: %v (handle %v); want refused as another home's slot", err, sg.handle)
	}
	sg = formerAdoption(other)
	if err := sg.adoptSandbox(ctx, pG); err == nil || !strings.Contains(err.Error(), "another home's slot") || sg.handle != nil {
		t.Errorf("another home's adoption of the former identity's dispatch: %v (handle %v); want refused as another home's slot", err, sg.handle)
	}
	if err := other.sweepK8sSlots(ctx); err != nil {
		t.Fatal(err)
	}
	for what, slot := range map[string]string{"claimed": claimed.ID, "unclaimed": idle.ID, "former identity's": old.ID, "former identity's claimed": formerClaimed.ID} {
		if !k.jobStands(t, slot) {
			t.Errorf("another home's sweep deleted the home's %s slot Job", what)
		}
	}

	// The standby adopts, on host-b.
	sb := adoption(standby)
	if err := sb.adoptSandbox(ctx, pB); err != nil || sb.handle == nil {
		t.Fatalf("the standby's adoption = %v (handle %v); want the slot's Job followed", err, sb.handle)
	}
	t.Cleanup(func() { waitEnded(t, "the standby's adopted handle", sb.handle) })
	if sb.handle.TaskID() != task {
		t.Errorf("adopted task %q, want the recorded %q", sb.handle.TaskID(), task)
	}
	// And the dispatch claimed under the former identity, after the upgrade.
	sf := formerAdoption(standby)
	if err := sf.adoptSandbox(ctx, pB); err != nil || sf.handle == nil {
		t.Errorf("the standby's adoption of the slot claimed under its former identity = %v (handle %v); want the slot's Job followed", err, sf.handle)
	} else {
		t.Cleanup(func() { waitEnded(t, "the standby's adopted handle of the former identity's slot", sf.handle) })
	}
	// And sweeps what no living holder of the home stands for.
	if err := standby.sweepK8sSlots(ctx); err != nil {
		t.Fatal(err)
	}
	if !k.jobStands(t, claimed.ID) || !k.jobStands(t, formerClaimed.ID) {
		t.Error("the standby's sweep deleted a claimed slot's Job it adopted")
	}
	if k.jobStands(t, idle.ID) {
		t.Error("the standby's sweep left the dead leader's unclaimed slot Job (it leaks until its deadline)")
	}
	if k.jobStands(t, old.ID) {
		t.Error("the standby's sweep left the slot Job an older agora of its host made (former identity)")
	}
}
