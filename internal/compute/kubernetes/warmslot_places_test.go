package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// On kwok: a slot's read-only places, mounted read-only in the worker's container
// and filled by the filler at the claim.

// startSlotPlaces starts a slot of tmpl with places.
func startSlotPlaces(t *testing.T, p *Provider, g *slotGW, tmpl compute.Spec, places []remote.SlotPlace) *Slot {
	t.Helper()
	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	sl, err := p.StartSlot(t.Context(), tmpl, SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: places})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	return sl
}

// The attack: claim a slot with a dispatch whose read-only places are not the slot's (a place
// the slot lacks, a file where the slot has a directory, a place the dispatch lacks). Its
// worker would find a read-only mount with nothing filled in it, or a mount it cannot make in
// a read-only one: each is refused before the bind, the slot deleted, and the dispatch told to
// start cold. And a slot of another layout (one started for a proxy dispatch, with the trust
// store's bind, claimed by a dispatch without it, and the reverse) is refused by its shape.
func TestWarmSlot_ClusterPlacesMustMatch(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	for _, tc := range []struct {
		name   string
		places []remote.SlotPlace
		why    string
	}{
		{"no place", nil, "the slot has no place at /agora/bundle"},
		{"file for a directory", []remote.SlotPlace{{Dst: "/agora/bundle", File: true}}, "/agora/bundle is a directory in the dispatch and a file in the slot"},
		{"a place the dispatch lacks", append(warmPlaces[:1:1], remote.SlotPlace{Dst: "/agora/inputs"}), "a place at /agora/inputs the dispatch has no read-only mount for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := startSlotPlaces(t, p, g, warmSpec(t, "TEMPLATE"), tc.places)
			runRefused(t, sl, warmSpec(t, clusterID("PLACES")), tc.why)
		})
	}

	trust := compute.Bind{Src: t.TempDir() + "/ca.crt", Dst: "/etc/ssl/certs/ca-certificates.crt"}
	proxy := func(id string) compute.Spec {
		s := warmSpec(t, id)
		s.Binds = append(s.Binds, trust)
		return s
	}
	sl := startSlotPlaces(t, p, g, proxy("TEMPLATE"), append(warmPlaces[:1:1], remote.SlotPlace{Dst: trust.Dst, File: true}))
	runRefused(t, sl, warmSpec(t, clusterID("PLAIN")), "shape is not the slot's")
	sl = startSlotPlaces(t, p, g, warmSpec(t, "TEMPLATE"), warmPlaces)
	runRefused(t, sl, proxy(clusterID("PROXY")), "shape is not the slot's")
}

// The attack: from the agent in a claimed slot, write into the filler's side (its volumes, its
// socket) or reach its processes. The pod as stored: no process namespace shared; every place
// read-only in the worker's container, and no volume the filler writes mounted writable there;
// the filler holds no token (the worker hands it the grant at the claim) and names no Secret
// but its pod's; it has the hardening of every container.
func TestWarmSlot_ClusterFillerUnreachable(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	places := []remote.SlotPlace{{Dst: "/agora/bundle"}, {Dst: "/agora/bundle/manifest.json", File: true}}
	sl := startSlotPlaces(t, p, g, warmSpec(t, "TEMPLATE"), places)
	pod := mustPod(t, sl)
	if s := pod.Spec.ShareProcessNamespace; s != nil && *s {
		t.Error("the slot's pod shares its process namespace: the agent would see the filler's /proc/PID/root")
	}
	writableIn := map[string]map[string]bool{} // container -> volumes it writes
	for _, c := range pod.Spec.Containers {
		writableIn[c.Name] = map[string]bool{}
		for _, m := range c.VolumeMounts {
			if !m.ReadOnly {
				writableIn[c.Name][m.Name] = true
			}
		}
	}
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Name != workerContainer || pod.Spec.Containers[1].Name != fillContainer {
		t.Fatalf("containers %v, want the worker and the filler", pod.Spec.Containers)
	}
	for vol := range writableIn[fillContainer] {
		if writableIn[workerContainer][vol] {
			t.Errorf("volume %s is writable in both the filler and the worker's container", vol)
		}
	}
	for i, pl := range places {
		found := false
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.MountPath == pl.Dst {
				found = m.ReadOnly && m.Name == placeVolume(i) && (m.SubPath == remote.FileName) == pl.File
			}
		}
		if !found {
			t.Errorf("place %s is not a read-only mount of its volume in the worker's container", pl.Dst)
		}
		if !writableIn[fillContainer][placeVolume(i)] {
			t.Errorf("the filler cannot write place %s", pl.Dst)
		}
	}
	f := pod.Spec.Containers[1]
	for _, e := range f.Env {
		switch {
		case e.Name == remote.TokenEnv:
			t.Errorf("the filler gets %s", e.Name)
		case e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != sl.name || e.ValueFrom.SecretKeyRef.Key != secretCA):
			t.Errorf("the filler takes %s from %+v: want only the gateway's CA from its pod's Secret", e.Name, e.ValueFrom)
		}
	}
	if len(f.EnvFrom) != 0 || f.Image != p.opts.WorkerImage {
		t.Errorf("the filler: envFrom %v, image %s", f.EnvFrom, f.Image)
	}
	if sc := f.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.RunAsUser != nil {
		t.Errorf("the filler's security context %+v is not every container's", sc)
	}
}

// proxySpec is warmSpec with a dispatch's egress proxy trust: its stage's trust directory at
// /agora/trust and its trust file bound over the system store, as dispatch.trustBinds makes them.
func proxySpec(t testing.TB, id, pem string) compute.Spec {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(file, []byte(pem), 0o644); err != nil {
		t.Fatal(err)
	}
	s := warmSpec(t, id)
	s.Binds = append(s.Binds, compute.Bind{Src: dir, Dst: "/agora/trust"}, compute.Bind{Src: file, Dst: systemTrust})
	return s
}

const systemTrust = "/etc/ssl/certs/ca-certificates.crt"

// A dispatch with the egress proxy claims a slot started for its layout: the
// slot's pod has a read-only place at the system trust store (a subPath mount of an entry its
// init step makes, so the kubelet makes no directory there), the claim binds (warm, not told to
// start cold), and what the slot's filler fetches for that place is the claiming dispatch's
// trust file, not the template's. Before, checkSlotMounts refused every mount outside /agora
// and each proxy dispatch spent its slot and started cold.
func TestWarmSlot_ClusterProxyDispatchClaims(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	places := append(warmPlaces[:1:1], remote.SlotPlace{Dst: "/agora/trust"}, remote.SlotPlace{Dst: systemTrust, File: true})
	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	sl, err := p.StartSlot(t.Context(), proxySpec(t, "TEMPLATE", "template's CA\n"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: places})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	mounted := false
	for _, m := range mustPod(t, sl).Spec.Containers[0].VolumeMounts {
		if m.MountPath == systemTrust {
			mounted = m.ReadOnly && m.SubPath == remote.FileName
		}
	}
	if !mounted {
		t.Fatalf("the slot's worker has no read-only subPath mount at %s", systemTrust)
	}

	id := clusterID("PROXYWARM")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	trust, token := make(chan string, 1), podToken(t, p, sl)
	go func() { // the slot's worker claims; its filler fetches the read-only places with the grant
		c, err := workerremote.Claim(ctx, g.url, gs.ID, token, g.ca, nil)
		if err != nil {
			trust <- "claim: " + err.Error()
			return
		}
		defer c.Close()
		info, err := c.Info(ctx)
		if err != nil {
			trust <- "info: " + err.Error()
			return
		}
		for _, m := range info.Mounts {
			if m.Dst == systemTrust && m.File && remote.ReadOnlyMount(m) {
				dir := filepath.Join(t.TempDir(), "fill")
				if err := c.Fetch(ctx, m, dir); err != nil {
					trust <- "fetch: " + err.Error()
					return
				}
				b, _ := os.ReadFile(filepath.Join(dir, remote.FileName))
				trust <- string(b)
				return
			}
		}
		trust <- "no read-only trust file mount"
	}()
	h, err := sl.Run(ctx, proxySpec(t, id, "the dispatch's proxy CA\n"), gs.Bind)
	if err != nil {
		t.Fatalf("a proxy dispatch in a proxy slot: %v, want it run warm", err)
	}
	defer func() { cancel(); waitTimeout(t, h, 3*time.Minute) }()
	if got := <-trust; got != "the dispatch's proxy CA\n" {
		t.Errorf("the slot's trust store place gets %q, want the claiming dispatch's trust file", got)
	}
}
