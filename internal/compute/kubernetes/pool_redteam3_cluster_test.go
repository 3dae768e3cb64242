package kubernetes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the pool behind the compute seam on the real control plane with agent-sandbox's
// real controller, as two supervisors of one home and a neighbour in the namespace would make
// them, by someone who did not build it.

// warmBound is a pod a claim bound a dispatch to, and whether the pool made its Sandbox warm.
type warmBound struct {
	uid, dispatch string
	warm          bool
}

// recordBinds is a PodBind that records, before it binds, each pod it is asked to bind and
// whether the pool made that pod's Sandbox warm (not cold, for a claim the pool had none for).
func recordBinds(t *testing.T, admin *Provider, bind PodBind) (PodBind, func() []warmBound) {
	var mu sync.Mutex
	var got []warmBound
	return func(ctx context.Context, uid, dispatch, token string) error {
			b := warmBound{uid: uid, dispatch: dispatch}
			l, err := admin.client.CoreV1().Pods(admin.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, pod := range l.Items {
				if string(pod.UID) != uid {
					continue
				}
				if sb, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
					b.warm = sb.Labels[launchTypeLabel] == "warm"
				}
			}
			mu.Lock()
			got = append(got, b)
			mu.Unlock()
			return bind(ctx, uid, dispatch, token)
		}, func() []warmBound {
			mu.Lock()
			defer mu.Unlock()
			return append([]warmBound(nil), got...)
		}
}

// Attack: two supervisors of one home (each with its own provider, opening the holder's pool
// read-only) claim at once from a pool with one ready pod: two SandboxClaims race for it. The
// controller hands it to one; the other claim is refused (a Sandbox made cold for it never
// enrolled, and a pod the pool refilled since is not one the test's gateway enrolled), its
// claim deleted, and it starts cold. No pod is bound twice, no pod the pool did not make warm
// is bound at all, and the one pod's worker is handed exactly one dispatch.
func TestAgentSandboxPool_AttackTwoClaimsOneReadyPod(t *testing.T) {
	t.Parallel() // waits a minute on kwok: see "Parallel tests" in cluster_test.go
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	tmpl := poolSpec(t, "TEMPLATE", "two-claims")
	pl, err := p.EnsurePool(t.Context(), tmpl, PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 1, nil))

	p2, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	p2.testOnlyPodMeta = p.testOnlyPodMeta
	bind, binds := recordBinds(t, admin, g.slots.BindPod)
	ids := []string{clusterID("POOLRACEA"), clusterID("POOLRACEB")}
	type result struct {
		h   compute.Handle
		err error
	}
	results := make([]result, len(ids))
	var wg sync.WaitGroup
	for i, sup := range []*Provider{p, p2} {
		open, err := sup.OpenPool(t.Context(), poolSpec(t, ids[i], "two-claims"), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
		if err != nil || open.Name != pl.Name {
			t.Fatalf("supervisor %d's OpenPool = %v, %v; want the holder's pool %s", i, open, err, pl.Name)
		}
		wg.Go(func() {
			h, err := open.Claim(t.Context(), poolSpec(t, ids[i], "two-claims"), bind)
			if err == nil {
				cancelAtEnd(t, sup, h)
			}
			results[i] = result{h, err}
		})
	}
	wg.Wait()
	won := ""
	for i, r := range results {
		switch {
		case r.err == nil && won != "":
			t.Errorf("both claims of one ready pod succeeded (%s, %s)", won, ids[i])
		case r.err == nil:
			won = ids[i]
		default:
			t.Logf("claim %s refused: %v", ids[i], r.err)
			waitGone(t, "the refused claim", func() error {
				_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(ids[i]), metav1.GetOptions{})
				return err
			})
		}
	}
	if won == "" {
		t.Fatal("neither claim of the one ready pod succeeded")
	}
	handedTo(t, pods, won)
	seen := map[string]string{}
	for _, b := range binds() {
		if !b.warm {
			t.Errorf("dispatch %s was bound to pod %s, which the pool did not make warm", b.dispatch, b.uid)
		}
		if d, ok := seen[b.uid]; ok {
			t.Errorf("pod %s was bound twice (%s, %s)", b.uid, d, b.dispatch)
		}
		seen[b.uid] = b.dispatch
	}
}

// Attack: a neighbour in the namespace edits the pod of agora's pool template after agora made
// it: another image, another label, a hostPath volume, another ServiceAccount, a pod run as
// root. The controller replaces the pool's unclaimed pods from the edited template. A dispatch
// never claims from it: the claim is refused before any SandboxClaim is made (ErrSlotChanged),
// and the dispatch starts cold.
func TestAgentSandboxPool_AttackTemplatePodEdited(t *testing.T) {
	t.Parallel()
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	for name, patch := range map[string]string{
		"image":            `[{"op":"replace","path":"/spec/podTemplate/spec/containers/0/image","value":"registry.example/evil:1"}]`,
		"label":            `[{"op":"add","path":"/spec/podTemplate/metadata/labels/neighbour","value":"yes"}]`,
		"hostpath volume":  `[{"op":"add","path":"/spec/podTemplate/spec/volumes/-","value":{"name":"host","hostPath":{"path":"/"}}}]`,
		"service account":  `[{"op":"replace","path":"/spec/podTemplate/spec/serviceAccountName","value":"default"}]`,
		"security context": `[{"op":"add","path":"/spec/podTemplate/spec/securityContext/runAsUser","value":0}]`,
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			tag := "edited-" + strings.ReplaceAll(name, " ", "-")
			pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", tag), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pl.Delete(context.Background()); p.deletePolicy(pl.Name, pl.npUID) })
			if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, types.JSONPatchType,
				[]byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatalf("the neighbour's edit: %v", err)
			}
			id := clusterID("POOLEDITED")
			if _, err := pl.Claim(t.Context(), poolSpec(t, id, tag), func(context.Context, string, string, string) error {
				return errors.New("bound a pod of an edited template")
			}); !errors.Is(err, ErrSlotChanged) {
				t.Fatalf("Claim from a pool whose template's pod was edited (%s) = %v, want ErrSlotChanged", name, err)
			}
			if _, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a claim was made from a pool whose template's pod was edited: %v", err)
			}
			// A supervisor that opens the pool afresh (no Keep of its own) refuses it too.
			if _, err := p.OpenPool(t.Context(), poolSpec(t, id, tag), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces}); !errors.Is(err, ErrSlotChanged) {
				t.Errorf("OpenPool of a pool whose template's pod was edited = %v, want ErrSlotChanged", err)
			}
		})
	}
}
