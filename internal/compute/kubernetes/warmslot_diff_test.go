package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// podLines describes what a pod enforces as sorted lines that do not depend on its name or
// id: its security context, volumes (by kind, medium and size), each container's image,
// command, mounts (by path and read-only flag), environment (names; values only when they are
// not per-object), security context and resources. A uid of the target's range is "range".
func podLines(pod *corev1.Pod, own string) []string {
	var out []string
	add := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	s := pod.Spec
	uid := func(p *int64) string {
		if p == nil {
			return "unset"
		}
		lo, hi := compute.SandboxUIDRange(DefaultSandboxUID)
		if *p >= int64(lo) && *p <= int64(hi) {
			return "range"
		}
		return fmt.Sprint(*p)
	}
	if sc := s.SecurityContext; sc != nil {
		add("pod runAsUser=%s runAsGroup=%s fsGroup=%s nonroot=%v seccomp=%v", uid(sc.RunAsUser), uid(sc.RunAsGroup), uid(sc.FSGroup), *sc.RunAsNonRoot, sc.SeccompProfile.Type)
	}
	add("pod automountSAToken=%v serviceLinks=%v host=%v/%v/%v shareProcess=%v runtimeClass=%v grace=%v",
		*s.AutomountServiceAccountToken, *s.EnableServiceLinks, s.HostNetwork, s.HostPID, s.HostIPC, s.ShareProcessNamespace != nil && *s.ShareProcessNamespace,
		s.RuntimeClassName != nil, *s.TerminationGracePeriodSeconds)
	vols := map[string]string{}
	for _, v := range s.Volumes {
		k := "other"
		if e := v.EmptyDir; e != nil {
			k = fmt.Sprintf("emptyDir medium=%q size=%v", e.Medium, e.SizeLimit)
		}
		vols[v.Name] = k
		add("volume %s", k)
	}
	for _, c := range append(slices.Clone(s.InitContainers), s.Containers...) {
		add("%s image=%s command=%q dir=%s", c.Name, c.Image, c.Command, c.WorkingDir)
		for _, m := range c.VolumeMounts {
			sub := ""
			if m.SubPath != "" {
				sub = " subPath"
			}
			add("%s mount %s readOnly=%v%s (%s)", c.Name, m.MountPath, m.ReadOnly, sub, vols[m.Name])
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == own:
				add("%s env %s from its own Secret", c.Name, e.Name)
			case e.ValueFrom != nil:
				add("%s env %s from elsewhere", c.Name, e.Name)
			default:
				add("%s env %s=%s", c.Name, e.Name, e.Value)
			}
		}
		sec, _ := json.Marshal(c.SecurityContext)
		res, _ := json.Marshal(c.Resources)
		add("%s security=%s resources=%s", c.Name, sec, res)
	}
	slices.Sort(out)
	return out
}

// The isolation diff of a cold pod and a claimed slot's pod on kwok: the same dispatch
// spec started cold and run in a claimed slot, both pods as the API server stores them,
// described line by line (podLines). Every remaining difference is a named line below, each
// explained in docs/providers-k8s.md ("Differences from a cold pod"); a new difference, or one
// that went away, fails the test, so the docs stay true.
func TestWarmSlotParity_ClusterColdVsClaimedDiff(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)

	coldID := clusterID("COLD")
	cold := warmSpec(t, coldID)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.Start(ctx, cold)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); waitTimeout(t, h, 3*time.Minute) }()
	coldPod := waitPod(t, p, coldID)

	sl, gs := startSlot(t, p, g)
	id := clusterID("HOT")
	got := workerClaims(ctx, g, gs.ID, podToken(t, p, sl))
	hh, err := sl.Run(ctx, warmSpec(t, id), gs.Bind)
	if err != nil {
		t.Fatalf("Run in the slot: %v", err)
	}
	defer func() { cancel(); waitTimeout(t, hh, 3*time.Minute) }()
	if d := <-got; d != id {
		t.Fatalf("the slot's worker was handed %q", d)
	}
	hotPod := mustPod(t, sl)

	c, w := podLines(&coldPod, objectName(coldID)), podLines(hotPod, sl.name)
	onlyCold, onlyHot := minus(c, w), minus(w, c)
	// The named differences, each in docs/providers-k8s.md. The read-only places are no
	// difference: the bundle is a read-only mount of its own emptyDir in both.
	places, _ := json.Marshal(warmPlaces)
	fillSec, _ := json.Marshal(containerSecurity())
	fillRes, _ := json.Marshal(fillResources(coldPod.Spec.Containers[0].Resources))
	wantCold := []string{
		// 1. the read-only place's volume in the init step: a cold pod's is named for its
		//    mount, a slot's for its place (its mount's name comes with the dispatch).
		`fetch mount /agora/stage/bundle readOnly=false (emptyDir medium="" size=256Mi)`,
		// 2. the out directory: a cold pod's own emptyDir; a slot's, a directory of /agora.
		`worker mount /agora/out readOnly=false (emptyDir medium="" size=256Mi)`,
		`fetch mount /agora/stage/out readOnly=false (emptyDir medium="" size=256Mi)`,
		// 3. the fetch step: a cold pod's init container fetches its dispatch's mounts from
		//    the gateway with the dispatch's token; a slot's only copies the worker binary
		//    and makes its places' entries, and reaches no gateway (its filler and worker
		//    fetch after the claim).
		`fetch env AGORA_DISPATCH_ID=` + coldID,
		`fetch env AGORA_GATEWAY_CA from its own Secret`,
		`fetch env AGORA_GATEWAY_TOKEN from its own Secret`,
		`fetch env AGORA_GATEWAY_URL=` + p.opts.GatewayURL,
		// 5. the dispatch id: a cold worker's from its Secret; a slot's from the claim's grant.
		`worker env AGORA_DISPATCH_ID from its own Secret`,
		// 4. the working directory: a slot's worker starts in /tmp and moves to the
		//    dispatch's once it fetched it.
		`worker image=` + p.opts.Image + ` command=["/agora/bin/agora-worker" "worker"] dir=/agora/workspace`,
		`worker env PWD=/agora/workspace`,
	}
	wantHot := []string{
		// 2. the slot's /agora: one writable emptyDir the worker fetches the writable mounts
		//    into (the cold pod's out volume of that size against this one).
		`worker mount /agora readOnly=false (emptyDir medium="" size=256Mi)`,
		// 1.
		`fetch mount /agora/stage/p-0 readOnly=false (emptyDir medium="" size=256Mi)`,
		// 3. the fetch step of a slot names the slot and its places (it makes their entries).
		`fetch env AGORA_SLOT_ID=` + sl.ID,
		`fetch env AGORA_SLOT_PLACES=` + string(places),
		`worker env AGORA_SLOT_ID=` + sl.ID,
		// 4.
		`worker image=` + p.opts.Image + ` command=["/agora/bin/agora-worker" "worker"] dir=/tmp`,
		`worker env PWD=/tmp`,
		// 6. the filler: a container of agora's worker image holding the places' volumes
		//    writable (the worker's container has them read-only), no token (the worker hands
		//    it the grant at the claim, on the socket in its own small volume, read-only in
		//    the worker's container), its own small resources.
		`volume emptyDir medium="" size=1Mi`,
		`worker mount /agora/fill readOnly=true (emptyDir medium="" size=1Mi)`,
		`worker env AGORA_SLOT_FILL=/agora/fill/fill.sock`,
		`fill image=` + p.opts.WorkerImage + ` command=["/agora/bin/agora-worker" "worker" "fill"] dir=`,
		`fill mount /agora/stage/p-0 readOnly=false (emptyDir medium="" size=256Mi)`,
		`fill mount /agora/fill readOnly=false (emptyDir medium="" size=1Mi)`,
		`fill env AGORA_GATEWAY_URL=` + p.opts.GatewayURL,
		`fill env AGORA_GATEWAY_CA from its own Secret`,
		`fill env AGORA_STAGE=/agora/stage`,
		`fill env AGORA_SLOT_PLACES=` + string(places),
		`fill env AGORA_SLOT_FILL=/agora/fill/fill.sock`,
		`fill security=` + string(fillSec) + ` resources=` + string(fillRes),
	}
	slices.Sort(wantCold)
	slices.Sort(wantHot)
	if !slices.Equal(onlyCold, wantCold) || !slices.Equal(onlyHot, wantHot) {
		t.Errorf("cold vs claimed pod, unnamed or vanished differences:\nonly cold:\n  %s\nonly claimed:\n  %s\nwant only cold:\n  %s\nwant only claimed:\n  %s",
			strings.Join(onlyCold, "\n  "), strings.Join(onlyHot, "\n  "), strings.Join(wantCold, "\n  "), strings.Join(wantHot, "\n  "))
	}
}

// minus is a without b, counting repeats (a multiset difference), sorted.
func minus(a, b []string) []string {
	n := map[string]int{}
	for _, x := range b {
		n[x]++
	}
	var out []string
	for _, x := range a {
		if n[x] > 0 {
			n[x]--
			continue
		}
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}
