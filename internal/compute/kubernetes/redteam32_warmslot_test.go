package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/agora-dev/agora/internal/k8stest"
)

// Attacks on Kubernetes warm slots: what someone with rights on the slot's pods (not on
// agora) can do to a slot while it waits, and what the slot can reach before its claim. Each
// edit must make the slot unclaimable: Run refuses it before any bind.

// refusedBeforeBind runs a dispatch in sl and fails t unless it is refused with ErrSlotChanged
// before anything is bound to the slot.
func refusedBeforeBind(t *testing.T, sl *Slot) {
	t.Helper()
	bound := false
	_, err := sl.Run(t.Context(), warmSpec(t, clusterID("RT32")), func(ctx context.Context, dispatch, token string) error {
		bound = true // no worker claims here: a bind would wait for ever
		return errors.New("bound")
	})
	if !errors.Is(err, ErrSlotChanged) || bound {
		t.Fatalf("Run in an edited slot = %v (bound %v), want ErrSlotChanged before any bind", err, bound)
	}
}

func TestRedTeam32_WarmSlotPodEditsNeverClaimed(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	attacks := map[string]func(t *testing.T, sl *Slot){
		// kubectl debug: an ephemeral container joins the waiting pod (any image, its own
		// security context, the worker's process namespace as target): after the claim it
		// could read the dispatch's secrets from the worker.
		"ephemeral container": func(t *testing.T, sl *Slot) {
			pod, err := sl.findPod(t.Context())
			if err != nil || pod == nil {
				t.Fatalf("slot pod: %v", err)
			}
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
				TargetContainerName: pod.Spec.Containers[0].Name,
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debugger", Image: "registry.example/debug@sha256:" + strings.Repeat("b", 64),
					Command: []string{"sh"}, ImagePullPolicy: corev1.PullIfNotPresent,
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					// What the namespace's restricted Pod Security admits, reading what the
					// worker fetches the dispatch into.
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptrTo(false), RunAsNonRoot: ptrTo(true),
						Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: slotRootVolume, MountPath: "/stolen"}},
				},
			})
			if _, err := fullClient(t).CoreV1().Pods(p.ns).UpdateEphemeralContainers(t.Context(), pod.Name, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("add an ephemeral container: %v", err)
			}
		},
		// In-place resize (the pods/resize subresource): the waiting pod's worker container
		// given ten times the memory and CPU the dispatch's limits say; the claimed dispatch
		// would run past them.
		"resized in place": func(t *testing.T, sl *Slot) {
			pod, err := sl.findPod(t.Context())
			if err != nil || pod == nil {
				t.Fatalf("slot pod: %v", err)
			}
			c := pod.Spec.Containers[0]
			mem := c.Resources.Limits.Memory().Value() * 10
			cpu := c.Resources.Limits.Cpu().MilliValue() * 10
			patch := fmt.Appendf(nil, `{"spec":{"containers":[{"name":%q,"resources":{"limits":{"memory":"%d","cpu":"%dm"},"requests":{"memory":"%d","cpu":"%dm"}}}]}}`,
				c.Name, mem, cpu, mem, cpu)
			cs := fullClient(t)
			// The API server admits a resize once the node's kubelet reports its running
			// containers' resources, as a real 1.36 kubelet does (kwok reports none): report
			// them as it would.
			for i := range pod.Status.ContainerStatuses {
				for _, k := range pod.Spec.Containers {
					if k.Name == pod.Status.ContainerStatuses[i].Name {
						pod.Status.ContainerStatuses[i].Resources = k.Resources.DeepCopy()
					}
				}
			}
			if _, err := cs.CoreV1().Pods(p.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("report the container resources: %v", err)
			}
			if _, err := cs.CoreV1().Pods(p.ns).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
				t.Fatalf("resize the slot pod: %v", err)
			}
		},
		// The slot's pod deleted while it waits (a node drained, someone's kubectl): the Job
		// runs no other (backoffLimit 0); the slot is gone.
		"pod deleted": func(t *testing.T, sl *Slot) {
			pod, err := sl.findPod(t.Context())
			if err != nil || pod == nil {
				t.Fatalf("slot pod: %v", err)
			}
			if err := p.client.CoreV1().Pods(p.ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
				t.Fatal(err)
			}
		},
		// The slot's pod relabelled out of its NetworkPolicy's selector: it leaves the watch's
		// label selector too (a Deleted event).
		"relabelled": func(t *testing.T, sl *Slot) {
			pod, err := sl.findPod(t.Context())
			if err != nil || pod == nil {
				t.Fatalf("slot pod: %v", err)
			}
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, labelSlot)
			if _, err := p.client.CoreV1().Pods(p.ns).Patch(t.Context(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		// The slot's pod deleted and a pod of the attacker's made in its place, within the
		// namespace's restricted Pod Security: the slot's labels (its policy selects it, and
		// it mounts the slot's Secret), an owner reference to the slot's Job (not as
		// controller, so the Job controller leaves it), the same containers, but the volume
		// the worker fetches the dispatch into (/agora) is a claim on storage of the
		// attacker's: the dispatch's files outlive it, where the attacker reads them.
		"forged pod with the slot's volume on a claim": func(t *testing.T, sl *Slot) {
			forgedPod(t, p, sl, func(s *corev1.PodSpec) {
				for i := range s.Volumes {
					if s.Volumes[i].Name == slotRootVolume {
						s.Volumes[i].VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "attackers"}}
					}
				}
			})
		},
	}
	for name, attack := range attacks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sl, _ := startSlot(t, p, g)
			if err := sl.Check(t.Context()); err != nil {
				t.Fatalf("a fresh slot fails its check: %v", err)
			}
			if !sl.Alive() {
				t.Fatal("a fresh slot is not alive")
			}
			attack(t, sl)
			// The slot's pod watch sees the edit while the slot waits: it is
			// counted gone at once (its holder starts another), not at the next claim.
			select {
			case <-sl.Gone():
			case <-time.After(time.Minute):
				t.Fatal("the slot's pod watch did not see the edit in a minute")
			}
			if sl.Alive() {
				t.Error("a slot whose pod was edited is still alive")
			}
			refusedBeforeBind(t, sl)
		})
	}
}

// fullClient is a whole clientset on the shared control plane (the provider's client has only
// the calls agora makes).
func fullClient(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{})
	cfg, err := restConfig(c.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// forgedPod deletes the slot's pod and makes one of the attacker's in its place: a copy of it
// (labels, annotations, owner reference to the Job without controller, node) with edit applied
// to its spec. It returns once the forged pod runs.
func forgedPod(t *testing.T, p *Provider, sl *Slot, edit func(*corev1.PodSpec)) {
	t.Helper()
	ctx := t.Context()
	real, err := sl.findPod(ctx)
	if err != nil || real == nil {
		t.Fatalf("slot pod: %v", err)
	}
	if err := p.client.CoreV1().Pods(p.ns).Delete(ctx, real.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := p.client.CoreV1().Pods(p.ns).Get(ctx, real.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: real.Name + "-x", Namespace: p.ns,
		Labels: map[string]string{}, Annotations: real.Annotations}}
	for k, v := range real.Labels {
		if !strings.HasPrefix(k, "batch.kubernetes.io/") && k != "controller-uid" && k != "job-name" {
			f.Labels[k] = v // not the Job's selector: its controller leaves the pod alone
		}
	}
	for _, r := range real.OwnerReferences {
		r.Controller, r.BlockOwnerDeletion = nil, nil
		f.OwnerReferences = append(f.OwnerReferences, r)
	}
	f.Spec = *real.Spec.DeepCopy()
	edit(&f.Spec)
	if _, err := p.client.CoreV1().Pods(p.ns).Create(ctx, f, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the forged pod: %v", err)
	}
	t.Cleanup(func() {
		p.client.CoreV1().Pods(p.ns).Delete(context.Background(), f.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}) //nolint:errcheck
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := p.client.CoreV1().Pods(p.ns).Get(ctx, f.Name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forged pod does not run: %v %v", err, got.Status.Phase)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Before its claim a slot reaches the gateway alone: its NetworkPolicy selects its pod, admits
// no ingress, and admits egress only to the gateway's addresses on its port (no DNS, no
// other pod); and the slot's token opens nothing but its own slot (another slot's id with it
// is refused).
func TestRedTeam32_WarmSlotReachesOnlyTheGatewayBeforeClaim(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	a, ga := startSlot(t, p, g)
	_, gb := startSlot(t, p, g)
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), a.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := a.findPod(t.Context())
	if err != nil || pod == nil {
		t.Fatalf("slot pod: %v", err)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the slot's policy selects %s=%s, its pod has %q", k, v, pod.Labels[k])
		}
	}
	if len(np.Spec.PodSelector.MatchExpressions) != 0 || len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Errorf("policy selector %+v", np.Spec.PodSelector)
	}
	types := map[string]bool{}
	for _, ty := range np.Spec.PolicyTypes {
		types[string(ty)] = true
	}
	if !types["Ingress"] || !types["Egress"] || len(np.Spec.Ingress) != 0 {
		t.Errorf("policy types %v, ingress %+v: want both types and no ingress rule", np.Spec.PolicyTypes, np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 1 {
		t.Fatalf("egress rules %+v, want one (the gateway)", np.Spec.Egress)
	}
	rule := np.Spec.Egress[0]
	if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || *rule.Ports[0].Port != intstr.FromInt32(int32(p.gateway.port)) || rule.Ports[0].EndPort != nil {
		t.Errorf("egress ports %+v, want the gateway's port %d alone", rule.Ports, p.gateway.port)
	}
	if len(rule.To) == 0 {
		t.Fatal("egress to any peer")
	}
	for _, peer := range rule.To {
		if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil || len(peer.IPBlock.Except) != 0 {
			t.Errorf("egress peer %+v: want an IP block of the gateway", peer)
			continue
		}
		ok := false
		for _, addr := range p.gateway.addrs {
			if peer.IPBlock.CIDR == addr.String()+"/32" || peer.IPBlock.CIDR == addr.String()+"/128" {
				ok = true
			}
		}
		if !ok {
			t.Errorf("egress to %s, not a gateway address (%v)", peer.IPBlock.CIDR, p.gateway.addrs)
		}
	}
	// Slot b's id with slot a's token (a's pod reaching for b's dispatch): refused.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if d := <-workerClaims(ctx, g, gb.ID, podToken(t, p, a)); !strings.HasPrefix(d, "refused: ") {
		t.Errorf("slot %s claimed with slot %s's token: %q", gb.ID, ga.ID, d)
	}
}
