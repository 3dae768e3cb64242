package kubernetes

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An attack on a proxy slot's trust file, on kwok: a slot started from a proxy dispatch's
// template (its trust file a read-only place at the system store). The attack: the template's
// trust file (an earlier dispatch's proxy CA) reaching the slot by another road than the
// claim's fill: the Job, the pod, the slot's Secret, or its NetworkPolicy (agora's
// client has no ConfigMap API at all). Each would hand one dispatch's CA to whichever claims the slot, whatever the
// filler then writes. The place must be the init step's empty entry, mounted read-only over
// the image's store from the pod's start (so the image's store is never what the worker sees).
func TestRedTeam35Trust_ClusterTemplateCANeverInSlot(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	const marker = "template-proxy-CA-4be1d07a"
	places := append(warmPlaces[:1:1], remote.SlotPlace{Dst: "/agora/trust"}, remote.SlotPlace{Dst: systemTrust, File: true})
	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	sl, err := p.StartSlot(t.Context(), proxySpec(t, "TEMPLATE", "-----BEGIN CERTIFICATE-----\n"+marker+"\n-----END CERTIFICATE-----\n"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: places})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	name := objectName(gs.ID)
	objs := map[string]any{"pod": mustPod(t, sl)}
	if job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else {
		objs["job"] = job
	}
	if sec, err := p.client.CoreV1().Secrets(p.ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	} else {
		objs["secrets"] = sec
	}
	if nps, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	} else {
		objs["networkpolicies"] = nps
	}
	for what, obj := range objs {
		b, _ := json.Marshal(obj)
		if strings.Contains(string(b), marker) {
			t.Errorf("the template's trust file reaches the slot's %s", what)
		}
	}
	pod := mustPod(t, sl)
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == systemTrust && !(c.Name == pod.Spec.Containers[0].Name && m.ReadOnly && m.SubPath == remote.FileName) {
				t.Errorf("container %s mounts %s (read-only %v, subPath %q): only the worker's read-only subPath mount of the place may", c.Name, systemTrust, m.ReadOnly, m.SubPath)
			}
		}
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "SSL_CERT_FILE" || e.Name == "SSL_CERT_DIR" || e.Name == "NODE_EXTRA_CA_CERTS" || e.Name == "REQUESTS_CA_BUNDLE" {
			t.Errorf("the slot's worker has %s=%q from the template: a trust store other than the place", e.Name, e.Value)
		}
	}
}
