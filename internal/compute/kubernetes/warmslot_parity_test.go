package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Claimed-slot parity on kwok: what a claimed slot shares with a cold pod, and the claims
// it refuses.

// startSlotAs is startSlot with the template's RunAs (a root agora's uid lease) set to ra.
func startSlotAs(t *testing.T, p *Provider, g *slotGW, ra *compute.HostUser) *Slot {
	t.Helper()
	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	tmpl := warmSpec(t, "TEMPLATE")
	tmpl.RunAs = ra
	sl, err := p.StartSlot(t.Context(), tmpl, SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	return sl
}

// runRefused claims sl with spec and wants it refused before any bind, and the slot's Job
// deleted (a slot is used once: a refused claim spends it).
func runRefused(t *testing.T, sl *Slot, spec compute.Spec, why string) {
	t.Helper()
	bound := false
	_, err := sl.Run(t.Context(), spec, func(ctx context.Context, dispatch, token string) error {
		bound = true
		return errors.New("bound")
	})
	if err == nil || bound || !strings.Contains(err.Error(), why) {
		t.Fatalf("Run = %v (bound %v), want refused before any bind, saying %q", err, bound, why)
	}
	job, err := sl.p.client.BatchV1().Jobs(sl.p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err == nil && job.DeletionTimestamp == nil && job.UID == sl.job {
		t.Errorf("the refused slot's Job %s stands, not being deleted", sl.name)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// A slot's pod runs as the uid it was started with: a root agora's slot as the uid it leased
// (the dispatch claiming it takes the lease over and runs as it, as a cold pod runs as its
// leased uid), else as its slot id's uid of the target's range. The attack: a claim of a slot
// made for another uid, or for another shape, is refused before the bind, never run as a uid
// the dispatch does not hold. Failed before: a root agora's dispatch (RunAs its lease) was
// bound to a slot running as the slot id's uid, and Run never compared them.
func TestWarmSlotParity_ClusterOtherUIDOrShapeRefused(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	leased := &compute.HostUser{UID: 70123, GID: 70123}
	sl := startSlotAs(t, p, g, leased)
	pod, err := sl.findPod(t.Context())
	if err != nil || pod == nil {
		t.Fatalf("slot pod: %v", err)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 70123 || *sc.RunAsGroup != 70123 {
		t.Fatalf("a slot leased uid 70123 runs its pod as %+v", sc)
	}
	other := warmSpec(t, clusterID("UID"))
	other.RunAs = &compute.HostUser{UID: 70124, GID: 70124}
	runRefused(t, sl, other, "the slot's pod as 70123:70123")

	// A slot with no lease (its slot id's uid) is not claimed by a dispatch that leased one.
	sl = startSlotAs(t, p, g, nil)
	if sc := mustPod(t, sl).Spec.SecurityContext; *sc.RunAsUser != int64(compute.SandboxUIDFor(DefaultSandboxUID, sl.ID)) {
		t.Errorf("an unleased slot's pod runs as %d, want its slot id's uid %d", *sc.RunAsUser, compute.SandboxUIDFor(DefaultSandboxUID, sl.ID))
	}
	leasedSpec := warmSpec(t, clusterID("UID"))
	leasedSpec.RunAs = leased
	runRefused(t, sl, leasedSpec, "the dispatch runs as 70123:70123")

	// And a leased slot by a dispatch without one.
	sl = startSlotAs(t, p, g, leased)
	runRefused(t, sl, warmSpec(t, clusterID("UID")), "the slot's pod as 70123:70123")

	// Another shape: another argv, another environment value.
	sl = startSlotAs(t, p, g, nil)
	argv := warmSpec(t, clusterID("SHAPE"))
	argv.Argv = append(argv.Argv, "--other")
	runRefused(t, sl, argv, "shape is not the slot's")
	sl = startSlotAs(t, p, g, nil)
	env := warmSpec(t, clusterID("SHAPE"))
	env.Env = append(env.Env, "EXTRA=1")
	runRefused(t, sl, env, "shape is not the slot's")
}

func mustPod(t *testing.T, sl *Slot) *corev1.Pod {
	t.Helper()
	pod, err := sl.findPod(t.Context())
	if err != nil || pod == nil {
		t.Fatalf("slot pod: %v", err)
	}
	return pod
}

// The attack: from the agent in a claimed slot, read another slot's Secret or token. The slot
// pod reaches no API server (its NetworkPolicy admits the gateway alone, checked at the claim)
// and holds no credential to one: no service account token, no Secret or projected volume;
// every Secret it names is its own. So two slots' pods as stored by the API server: neither
// names the other's Secret, neither mounts any Secret, and neither's JSON holds either token.
func TestWarmSlotParity_ClusterNoOtherSlotSecret(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	a, ga := startSlot(t, p, g)
	b, gb := startSlot(t, p, g)
	for _, sl := range []*Slot{a, b} {
		pod, err := sl.findPod(t.Context())
		if err != nil || pod == nil {
			t.Fatalf("slot pod: %v", err)
		}
		spec := pod.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("slot %s: the pod mounts a service account token", sl.ID)
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil || v.Projected != nil || v.EmptyDir == nil {
				t.Errorf("slot %s: volume %s is not an emptyDir: %+v", sl.ID, v.Name, v.VolumeSource)
			}
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != sl.name {
					t.Errorf("slot %s: container %s names Secret %s", sl.ID, c.Name, e.ValueFrom.SecretKeyRef.Name)
				}
			}
			if len(c.EnvFrom) != 0 {
				t.Errorf("slot %s: container %s takes a whole Secret or ConfigMap", sl.ID, c.Name)
			}
		}
		raw, _ := json.Marshal(pod)
		for _, tok := range []string{ga.Token, gb.Token} {
			if strings.Contains(string(raw), tok) {
				t.Errorf("slot %s: its pod holds a slot token", sl.ID)
			}
		}
	}
}

// The attack: the egress proxy's password visible in a pod's spec or environment. A cold pod
// names it (a secretKeyRef) and holds it in its Secret only; a slot refuses a template that
// carries it (its Secret is made before any dispatch, so it would hand one dispatch's password
// to whichever claims the slot): no slot Job, Secret or policy is left. Failed before: StartSlot
// put the template's password in the slot's Secret.
func TestWarmSlotParity_ClusterProxyPasswordNeverInSpecOrSlot(t *testing.T) {
	if proxyTokenEnv != wire.ProxyTokenEnv {
		t.Fatalf("proxyTokenEnv %q, the worker reads %q", proxyTokenEnv, wire.ProxyTokenEnv)
	}
	g := startSlotGW(t)
	p := slotProvider(t, g)
	const password = "agora-proxy-password-7c1f9e2b"
	id := clusterID("PROXY")
	cold := warmSpec(t, id)
	cold.Env = append(cold.Env, wire.ProxyTokenEnv+"="+password)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := p.Start(ctx, cold)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); waitTimeout(t, h, 3*time.Minute) }()
	pod := waitPod(t, p, id)
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for what, obj := range map[string]any{"job": job, "pod": pod} {
		b, _ := json.Marshal(obj)
		if strings.Contains(string(b), password) {
			t.Errorf("the cold %s holds the proxy password", what)
		}
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == wire.ProxyTokenEnv {
			named = e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == objectName(id)
		}
	}
	if !named {
		t.Errorf("the cold worker does not take %s from its own Secret", wire.ProxyTokenEnv)
	}

	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	tmpl := warmSpec(t, "TEMPLATE")
	tmpl.Env = append(tmpl.Env, wire.ProxyTokenEnv+"="+password)
	sl, err := p.StartSlot(t.Context(), tmpl, SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: warmPlaces})
	if err == nil {
		sl.Discard()
		t.Fatal("StartSlot took a template holding the proxy password")
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("the refusal shows the password: %v", err)
	}
	name := objectName(gs.ID)
	if _, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused slot left its Secret: %v", err)
	}
	if _, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused slot left its Job: %v", err)
	}
}
