package kubernetes

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// identityTestHome is the home of TestAgentSandboxPool_ChangedTargetGetsNewPool: its sweeps
// delete lapsed pools of their home alone.
const identityTestHome = "k8sidentitytesthome"

// A target whose sandbox_uid, gateway_peer or resources changed (agora restarted with the new agora.yaml;
// the old holder never closed its pool) makes its pods or their policy otherwise: its pool is
// another pool, kept at once, so warm starts come back without anyone deleting the stale pool
// by hand; the stale pool, whose holder's lease lapses, is deleted by the new holder's sweep.
// A pool of the same name would be refused (its template or policy is not as agora makes it
// now) and warm starts would stay off.
func TestAgentSandboxPool_ChangedTargetGetsNewPool(t *testing.T) {
	t.Parallel()
	_, p, admin, _ := poolSetup(t)
	ctx := t.Context()
	for _, tt := range []struct {
		name   string
		change func(*Options)
	}{
		{"sandbox_uid", func(o *Options) { o.SandboxUID = DefaultSandboxUID + 0x01000000 }},
		{"gateway_peer", func(o *Options) {
			o.GatewayPeer = &GatewayPeer{Namespace: "agora", Pods: map[string]string{"app.kubernetes.io/name": "agora"}}
		}},
		{"resources", func(o *Options) { o.CPU = "250m" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			provider := func(change func(*Options)) *Provider {
				o := p.opts
				if change != nil {
					change(&o)
				}
				np, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				np.testOnlyPodMeta = failWith(0, "1h")
				return np
			}
			tmpl := poolSpec(t, "TEMPLATE", "identity-"+tt.name)
			before := provider(nil)
			before.testOnlyPoolLease = 5 * time.Second // its holder restarts: no keep renews it
			old, err := before.PoolWarmer(compute.PoolOptions{Home: identityTestHome, Replicas: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.Keep(ctx, tmpl); err != nil {
				t.Fatal(err)
			}
			stale := old.Held()
			after := provider(tt.change)
			after.testOnlyPoolLease = 5 * time.Second // its sweeps watch the stale pool's lease that long
			next, err := after.PoolWarmer(compute.PoolOptions{Home: identityTestHome, Replicas: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				next.Close(context.Background())
				old.Close(context.Background())
				for _, name := range []string{stale, next.Held()} {
					if np, err := p.findPolicy(context.Background(), name); err == nil && np != nil {
						p.deletePolicy(name, np.UID)
					}
					p.deleteGuard(context.Background(), name)
				}
			})
			if _, err := next.Keep(ctx, tmpl); err != nil {
				t.Fatalf("keep after %s changed: %v; want the changed target's own pool", tt.name, err)
			}
			if next.Held() == stale {
				t.Fatalf("after %s changed the target keeps pool %s, the stale one's name", tt.name, stale)
			}
			readyPoolPods(t, admin, next.Held(), 1, nil)
			held := func(pool string) bool { return pool == next.Held() }
			agoratest.Eventually(t, 2*time.Minute, "the stale pool deleted by the new holder's sweep", func() error {
				if _, err := next.Sweep(ctx, held); err != nil {
					return err
				}
				if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, stale, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("pool %s's template: %v", stale, err)
				}
				return nil
			})
			waitPoolParts(t, admin, stale, 0)
			if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, next.Held(), metav1.GetOptions{}); err != nil {
				t.Errorf("the changed target's pool %s after the sweep: %v", next.Held(), err)
			}
		})
	}
}
