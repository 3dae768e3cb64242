package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A holder killed inside StartSlot, after the slot's NetworkPolicy and Secret and before its
// Job owned them (serve killed with -9 while a standby makes its slot) leaves both, which a
// sweep of Jobs alone never finds. SweepSlots deletes a dead slot's parts by their labels,
// and leaves a live slot's (its holder is making it) and another home's. Without
// sweepSlotParts the dead slot's policy and Secret stand.
func TestWarmSlot_ClusterHalfMadeSlotSwept(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	ctx := t.Context()
	tmpl := warmSpec(t, "TEMPLATE")
	env, err := p.checkSpec(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := p.resolveGateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// halfMade makes a slot's parts as StartSlot does, up to where its holder was killed.
	halfMade := func(home string) (*Slot, func()) {
		gs, err := g.slots.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sl := &Slot{p: p, ID: gs.ID, name: objectName(gs.ID), gone: make(chan struct{})}
		if err := sl.createParts(ctx, SlotOptions{ID: gs.ID, Token: gs.Token, Home: home}, env, gw); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.deleteParts(sl.name, sl.np, sl.sec) }) //nolint:errcheck
		return sl, func() { gs.Close() }
	}
	dead, kill := halfMade(testHome)
	kill() // its holder is gone: its gateway slot with it
	alive, _ := halfMade(testHome)
	other, killOther := halfMade("otherhome")
	killOther()

	live := func(s string) bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, s))
		return err == nil
	}
	swept, err := p.SweepSlots(ctx, testHome, live)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(swept, dead.ID) || slices.Contains(swept, alive.ID) || slices.Contains(swept, other.ID) {
		t.Errorf("swept %v: want the dead holder's half-made slot %s only (not the live %s, not another home's %s)", swept, dead.ID, alive.ID, other.ID)
	}
	exists := func(sl *Slot) (policy, secret bool) {
		_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(ctx, sl.name, metav1.GetOptions{})
		policy = !apierrors.IsNotFound(err)
		_, err = fullClient(t).CoreV1().Secrets(p.ns).Get(ctx, sl.name, metav1.GetOptions{})
		secret = !apierrors.IsNotFound(err)
		return policy, secret
	}
	if np, sec := exists(dead); np || sec {
		t.Errorf("the dead holder's half-made slot keeps its policy %v, its Secret %v", np, sec)
	}
	for _, sl := range []*Slot{alive, other} {
		if np, sec := exists(sl); !np || !sec {
			t.Errorf("slot %s lost its policy (%v) or Secret (%v) to another's sweep", sl.ID, np, sec)
		}
	}
}
