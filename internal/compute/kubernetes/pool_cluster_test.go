package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// lateVerifier is the gateway's PodVerifier, set once the providers exist (they export to
// the gateway's registry, which must exist first).
type lateVerifier struct {
	mu sync.Mutex
	v  netgw.PodVerifier
}

func (l *lateVerifier) VerifyPod(ctx context.Context, token string) (remote.PodIdentity, error) {
	l.mu.Lock()
	v := l.v
	l.mu.Unlock()
	if v == nil {
		return remote.PodIdentity{}, errors.New("no verifier yet")
	}
	return v.VerifyPod(ctx, token)
}

// startPoolGW runs a real network gateway on loopback with the pool pods' enrolment served, verified by lv.
func startPoolGW(t testing.TB) (*slotGW, *lateVerifier) {
	t.Helper()
	home := t.TempDir()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(home, "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	g := &slotGW{reg: &netgw.Registry{Dir: filepath.Join(home, "gateway", "sessions")},
		slots: &netgw.Slots{Dir: filepath.Join(home, "gateway", "slots")}, ca: certs.CAPEM}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "https://" + ln.Addr().String()
	lv := &lateVerifier{}
	g.pods = lv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.srv = &netgw.Server{Registry: g.reg, Slots: g.slots, Pods: lv, Version: workerremote.Version()}
	go func() {
		defer close(done)
		g.srv.Serve(ctx, ln, certs.Server)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return g, lv
}

// poolSetup is a `backend: agent-sandbox` target's providers on the real control plane with
// agent-sandbox's real controller (as agora's ServiceAccount under the documented Role and the
// TokenReview ClusterRole, and as the admin), a gateway whose verifier is the role provider's,
// and a whole clientset (the test plays the kubelet: it mints the pool pods' projected tokens).
func poolSetup(t testing.TB) (g *slotGW, p, admin *Provider, cs *kubernetes.Clientset) {
	t.Helper()
	g, lv := startPoolGW(t)
	p, admin = warmSandboxProviders(t, g)
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	docs, err := os.ReadFile("../../../examples/kubernetes/rbac-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Each document on its own: one made by an earlier test of the shared cluster stops no other.
	for _, doc := range strings.Split(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace), "\n---\n") {
		if err := c.ApplyYAML(t.Context(), []byte(doc)); err != nil && !alreadyApplied(err) {
			t.Fatalf("apply examples/kubernetes/rbac-pool.yaml: %v", err)
		}
	}
	cfg, err := restConfig(c.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	lv.mu.Lock()
	lv.v = PoolVerifier{P: p, Pools: p.MadePools, Home: testHome}
	lv.mu.Unlock()
	return g, p, admin, cs
}

// cancelAtEnd cancels h's task when t ends and waits until h has ended: the handle closes
// its gateway session when its task is gone, and without the wait it does so after the
// test's directories are removed, making the registry's gateway/sessions/.locks again in a
// TempDir nobody removes any more.
func cancelAtEnd(t testing.TB, p *Provider, h compute.Handle) {
	t.Cleanup(func() {
		if err := p.Cancel(context.Background(), h.TaskID()); err != nil {
			t.Errorf("cancel %s: %v", h.TaskID(), err)
		}
		ended := make(chan struct{})
		go func() { h.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(2 * time.Minute):
			t.Errorf("task %s has not ended 2 minutes after its cancel", h.TaskID())
		}
	})
}

// poolSpec is warmSpec of a pool of the test's own (tag): tests sharing the cluster never
// share a pool.
func poolSpec(t testing.TB, id, tag string) compute.Spec {
	s := warmSpec(t, id)
	s.Env = append(s.Env, "POOLTEST="+tag)
	return s
}

// mintPodToken is what the kubelet puts in a pool pod's projected volume: a token of the pool's
// ServiceAccount for audience, bound to pod.
func mintPodToken(t testing.TB, cs *kubernetes.Clientset, pod *corev1.Pod, audience string) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(t.Context(), PoolServiceAccount, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptrTo(int64(poolTokenExpiry)),
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("mint pod %s's projected token: %v", pod.Name, err)
	}
	return tr.Status.Token
}

// readyPoolPods waits for n running pods of the pool that the pool still holds and returns them,
// oldest first, skipping those in skip.
func readyPoolPods(t testing.TB, admin *Provider, pool string, n int, skip map[string]bool) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	agoratest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d running unclaimed pods of pool %s", n, pool), func() error {
		l, err := admin.client.CoreV1().Pods(admin.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelPool + "=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		out = out[:0]
		for _, pod := range l.Items {
			if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil || skip[string(pod.UID)] {
				continue
			}
			sb, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if ref, ok := controllerRef(sb.OwnerReferences); ok && ref.Kind == "SandboxWarmPool" {
				out = append(out, pod)
			}
		}
		if len(out) < n {
			return fmt.Errorf("%d of them", len(out))
		}
		return nil
	})
	return out[:n]
}

// poolPod is a pool pod the test plays the init step and worker of.
type poolPod struct {
	pod   corev1.Pod
	jwt   string
	slot  remote.EnrollAnswer
	got   <-chan string
	claim context.CancelFunc
}

// enrolPods plays each pod's init step (enrol with its projected token) and worker (claim with
// the slot the enrolment gave).
func enrolPods(t testing.TB, g *slotGW, cs *kubernetes.Clientset, pods []corev1.Pod) map[string]*poolPod {
	t.Helper()
	return enrolPodsAs(t, g, cs, pods, testHome)
}

// enrolPodsAs is enrolPods for the pods of a pool of home (their tokens for its audience).
func enrolPodsAs(t testing.TB, g *slotGW, cs *kubernetes.Clientset, pods []corev1.Pod, home string) map[string]*poolPod {
	t.Helper()
	out := map[string]*poolPod{}
	for _, pod := range pods {
		pp, err := enrolPod(t, g, cs, pod, home)
		if err != nil {
			t.Fatalf("pool pod %s's enrolment: %v", pod.Name, err)
		}
		out[string(pod.UID)] = pp
	}
	return out
}

// enrolPod enrols pod of a pool of home with its token for the home's audience, and has its
// worker wait for a dispatch until the test ends.
func enrolPod(t testing.TB, g *slotGW, cs *kubernetes.Clientset, pod corev1.Pod, home string) (*poolPod, error) {
	t.Helper()
	jwt := mintPodToken(t, cs, &pod, PoolAudience(home))
	a, err := workerremote.Enroll(t.Context(), g.url, g.ca, jwt, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &poolPod{pod: pod, jwt: jwt, slot: a, got: workerClaims(ctx, g, a.Slot, a.Token), claim: cancel}, nil
}

// armPool makes n ready, unclaimed pods of the pool (but skip's) wait for a dispatch: a pod
// known already (enrolled earlier, its worker stopped) claims again, others enrol first. known
// gains the new ones. A pod kwok ended between being seen running and enrolling is refused by
// the gateway, rightly: it is passed over and another ready pod is armed in its place.
func armPool(t testing.TB, g *slotGW, cs *kubernetes.Clientset, admin *Provider, pool string, n int, skip map[string]bool, known map[string]*poolPod) map[string]*poolPod {
	t.Helper()
	out := map[string]*poolPod{}
	passed := maps.Clone(skip)
	if passed == nil {
		passed = map[string]bool{}
	}
	for ended := 0; len(out) < n; {
		for _, pod := range readyPoolPods(t, admin, pool, n-len(out), passed) {
			uid := string(pod.UID)
			passed[uid] = true
			if pp, ok := known[uid]; ok {
				ctx, cancel := context.WithCancel(t.Context())
				t.Cleanup(cancel)
				pp.got, pp.claim = workerClaims(ctx, g, pp.slot.Slot, pp.slot.Token), cancel
				out[uid] = pp
				continue
			}
			pp, err := enrolPod(t, g, cs, pod, testHome)
			if err != nil {
				if ended++; ended > 2*n || !podEnded(t, admin, pod) {
					t.Fatalf("pool pod %s's enrolment: %v", pod.Name, err)
				}
				t.Logf("pool pod %s ended before it enrolled (%v); arming another", pod.Name, err)
				continue
			}
			out[uid], known[uid] = pp, pp
		}
	}
	return out
}

// podEnded tells whether pod is gone, being deleted or no longer running.
func podEnded(t testing.TB, admin *Provider, pod corev1.Pod) bool {
	t.Helper()
	now, err := admin.client.CoreV1().Pods(admin.ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		return apierrors.IsNotFound(err)
	}
	return now.UID != pod.UID || now.DeletionTimestamp != nil || now.Status.Phase != corev1.PodRunning
}

// handedTo waits for the one pod of pods whose worker was handed dispatch id.
func handedTo(t testing.TB, pods map[string]*poolPod, id string) *poolPod {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		for _, pp := range pods {
			select {
			case d := <-pp.got:
				if d != id {
					t.Fatalf("pool pod %s's worker was handed %q, want %q", pp.pod.Name, d, id)
				}
				return pp
			default:
			}
		}
		select {
		case <-timeout:
			t.Fatalf("no pool pod's worker was handed %s", id)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func enrolCode(t testing.TB, g *slotGW, jwt string) int {
	t.Helper()
	_, err := workerremote.Enroll(t.Context(), g.url, g.ca, jwt, nil)
	var se *workerremote.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	if err != nil {
		t.Fatalf("enrol: %v", err)
	}
	return 200
}

// A dispatch runs through agent-sandbox's own warm pool on the real control plane with
// the real controller, every provider action as agora's ServiceAccount: agora makes the pool
// (template, warm pool, policy, Secret); each pool pod enrols once with its pod-bound projected
// token (a TokenReview by the real apiserver); a dispatch's SandboxClaim is handed a warm pod
// whose worker gets exactly that dispatch; it ends as a cold one does (code 0, the same
// isolation); two dispatches get two pods; the pod's token replayed (by itself after its claim,
// by anyone) and its slot token replayed are refused; the claimed pod never goes back to the
// pool and the next dispatch gets another.
func TestAgentSandboxPool_ClaimRunsDispatch(t *testing.T) {
	t.Parallel() // waits a minute on kwok: see "Parallel tests" in cluster_test.go
	g, p, admin, cs := poolSetup(t)
	// kwok ends the pods with code 0 90 s after they run: the cold one, and the pool's.
	p.testOnlyPodMeta = failWith(0, "90s")

	coldID := clusterID("POOLCOLD")
	cold, err := p.Start(t.Context(), warmSpec(t, coldID))
	if err != nil {
		t.Fatalf("cold start: %v", err)
	}
	coldExit := make(chan compute.Exit, 1)
	go func() { coldExit <- waitTimeout(t, cold, 3*time.Minute) }()

	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "run"), PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		t.Fatalf("EnsurePool: %v", err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	again, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "run"), PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil || again.Name != pl.Name {
		t.Fatalf("EnsurePool again = %v, %v; want the same pool %s", again, err, pl.Name)
	}
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 2, nil))
	for _, pp := range pods {
		// The same pod's token again (another pod that copied it): refused, the pod's slot
		// stays its own.
		if code := enrolCode(t, g, pp.jwt); code != 401 {
			t.Errorf("pod %s's token enrolled twice: %d, want 401", pp.pod.Name, code)
		}
		// A token of the pod for the apiserver's audience, not the gateway's: refused.
		if code := enrolCode(t, g, mintPodToken(t, cs, &pp.pod, "https://kubernetes.default.svc.cluster.local")); code != 401 {
			t.Errorf("pod %s's apiserver token enrolled: %d, want 401", pp.pod.Name, code)
		}
	}

	warmID := clusterID("POOLWARM")
	h, err := pl.Claim(t.Context(), poolSpec(t, warmID, "run"), g.slots.BindPod)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	first := handedTo(t, pods, warmID)
	if h.TaskID() != formatTaskID(p.ns, first.pod.Name) {
		t.Errorf("warm task id %q, want the claimed pod's Sandbox %q", h.TaskID(), formatTaskID(p.ns, first.pod.Name))
	}
	if d, err := p.Describe(t.Context(), h.TaskID()); err != nil || d.Gone || d.Object != first.pod.Name {
		t.Errorf("describe of the pool dispatch = %+v, %v; want its Sandbox", d, err)
	}
	// After the claim: the pod's token (its agent could have it) and its slot token get nothing.
	if code := enrolCode(t, g, first.jwt); code != 401 {
		t.Errorf("the claimed pod's token enrolled again: %d, want 401", code)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	if d := <-workerClaims(rctx, g, first.slot.Slot, first.slot.Token); !strings.HasPrefix(d, "refused: ") {
		t.Errorf("the claimed pod's slot token replayed was handed %q", d)
	}

	secondID := clusterID("POOLWARM2")
	h2, err := pl.Claim(t.Context(), poolSpec(t, secondID, "run"), g.slots.BindPod)
	if err != nil {
		t.Fatalf("second Claim: %v", err)
	}
	second := handedTo(t, pods, secondID)
	if second.pod.UID == first.pod.UID {
		t.Fatal("two dispatches were handed one pod")
	}

	warm, warm2, cexit := waitTimeout(t, h, 3*time.Minute), waitTimeout(t, h2, 3*time.Minute), <-coldExit
	for name, e := range map[string]compute.Exit{"cold": cexit, "warm": warm, "warm2": warm2} {
		if e.Code != 0 || e.Lost || e.Cancelled || e.TimedOut {
			t.Errorf("%s exit = %+v, want code 0", name, e)
		}
		if e.Isolation != "kubernetes+restricted+readonly+nonroot+netpol" {
			t.Errorf("%s isolation %q", name, e.Isolation)
		}
	}
	// Used once: the claims are gone with their Sandboxes, and the pool's next pods are others.
	for _, id := range []string{warmID, secondID} {
		waitGone(t, "claim", func() error {
			_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
			return err
		})
	}
	for _, pp := range []*poolPod{first, second} {
		waitGone(t, "claimed sandbox", func() error {
			_, err := admin.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), pp.pod.Name, metav1.GetOptions{})
			return err
		})
	}
	skip := map[string]bool{string(first.pod.UID): true, string(second.pod.UID): true}
	// The pods the pool made when the first two were claimed end on kwok's 90 s about when the
	// third dispatch claims (as long after those claims as the first two ran): the test deletes
	// their Sandboxes, so the pods the third may be handed are made now, their 90 s ahead of them.
	l, err := admin.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelPool + "=" + pl.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range l.Items {
		skip[string(pod.UID)] = true
	}
	sbs, err := admin.client.AgentsV1beta1().Sandboxes(p.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs.Items {
		if ref, ok := controllerRef(sb.OwnerReferences); ok && ref.Kind == "SandboxWarmPool" && ref.Name == pl.Name {
			if err := admin.deleteSandboxAs(sb.Name, sb.UID, metav1.DeletePropagationBackground); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Pods of the pool that end (kwok's 90 s) are replaced by the holder's refresh, which a
	// holder runs now and then.
	rctx2, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		for rctx2.Err() == nil {
			pl.Refresh(rctx2)
			sleep(rctx2, time.Second)
		}
	}()
	next := armPool(t, g, cs, admin, pl.Name, 2, skip, pods)
	thirdID := clusterID("POOLWARM3")
	h3, err := pl.Claim(t.Context(), poolSpec(t, thirdID, "run"), g.slots.BindPod)
	if err != nil {
		t.Fatalf("third Claim: %v", err)
	}
	if third := handedTo(t, next, thirdID); skip[string(third.pod.UID)] {
		t.Fatal("a used pod was handed another dispatch")
	}
	if err := p.Cancel(t.Context(), h3.TaskID()); err != nil {
		t.Fatalf("cancel a pool dispatch: %v", err)
	}
	if exit := waitTimeout(t, h3, 3*time.Minute); !exit.Cancelled {
		t.Errorf("cancelled pool dispatch exit = %+v, want Cancelled", exit)
	}
	waitGone(t, "cancelled claim", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(thirdID), metav1.GetOptions{})
		return err
	})
}

// Attack: someone who may create SandboxClaims in the namespace claims agora's pool (even
// wearing agora's labels). The controller hands them a pod of it. A pod they took before it
// enrolled can never enrol (the pool no longer holds its Sandbox), so no slot token is had for
// it; a pod they took after it enrolled waits for ever: its worker is never handed a dispatch
// (agora binds only the pod its own claim was handed, by uid); agora's next dispatch gets
// another pod.
func TestAgentSandboxPool_ForeignClaimGetsNothing(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "foreign"), PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	foreignClaim := func(name string, ready []corev1.Pod) *corev1.Pod {
		t.Helper()
		c := &claimObject{extObject{TypeMeta: metav1.TypeMeta{APIVersion: extGroupVersion.String(), Kind: "SandboxClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns,
				Labels: map[string]string{labelManagedBy: managedBy, labelDispatch: "01FOREIGN", labelPool: pl.Name}},
			Spec: json.RawMessage(`{"warmPoolRef":{"name":"` + pl.Name + `"}}`)}}
		made, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Create(t.Context(), c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.deleteClaim(made.Name, made.UID) })
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			for i := range ready {
				sb, err := admin.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), ready[i].Name, metav1.GetOptions{})
				if err == nil && controlledBy(sb.OwnerReferences, "SandboxClaim", made.Name, made.UID) {
					return &ready[i]
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the controller handed claim %s none of the pool's ready pods", name)
		return nil
	}

	// Before any pod enrolled: the pod taken never enrols.
	before := foreignClaim("someone-elses-1", readyPoolPods(t, admin, pl.Name, 2, nil))
	if code := enrolCode(t, g, mintPodToken(t, cs, before, PoolAudience(testHome))); code != 401 {
		t.Errorf("a pod claimed by someone else before it enrolled then enrolled: %d, want 401", code)
	}
	// After: every ready pod enrolled and waiting, one is taken.
	skip := map[string]bool{string(before.UID): true}
	known := map[string]*poolPod{}
	armed := armPool(t, g, cs, admin, pl.Name, 2, skip, known)
	var ready []corev1.Pod
	for _, pp := range armed {
		ready = append(ready, pp.pod)
	}
	after := foreignClaim("someone-elses-2", ready)
	skip[string(after.UID)] = true
	for uid := range armed {
		skip[uid] = true // armed already: their workers wait
	}
	others := armPool(t, g, cs, admin, pl.Name, 1, skip, known)
	for uid, pp := range armed {
		if uid != string(after.UID) {
			others[uid] = pp
		}
	}
	id := clusterID("POOLNOTFOREIGN")
	h, err := pl.Claim(t.Context(), poolSpec(t, id, "foreign"), g.slots.BindPod)
	if err != nil {
		t.Fatal(err)
	}
	if got := handedTo(t, others, id); got.pod.UID == before.UID || got.pod.UID == after.UID {
		t.Fatal("agora's dispatch was handed a pod someone else claimed")
	}
	select {
	case d := <-armed[string(after.UID)].got:
		t.Errorf("the pod someone else claimed after it enrolled was handed %q", d)
	case <-time.After(2 * time.Second):
	}
	p.Cancel(t.Context(), h.TaskID())
	waitTimeout(t, h, 3*time.Minute)
}

// Attack: the pool's template or policy edited behind agora's back (a Managed policy, env
// injection, another image, a widened policy) is never claimed from: the dispatch starts cold.
func TestAgentSandboxPool_ChangedPoolNeverClaimed(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	for name, edit := range map[string]func(pl *Pool) error{
		"managed policy": func(pl *Pool) error {
			_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"networkPolicyManagement":"Managed"}}`), metav1.PatchOptions{})
			return err
		},
		"env overrides": func(pl *Pool) error {
			_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"envVarsInjectionPolicy":"Overrides"}}`), metav1.PatchOptions{})
			return err
		},
		"widened policy": func(pl *Pool) error {
			_, err := admin.client.NetworkingV1().NetworkPolicies(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"egress":[{}]}}`), metav1.PatchOptions{})
			return err
		},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			spec := warmSpec(t, "TEMPLATE")
			spec.Env = append(spec.Env, "POOLCASE="+strings.ReplaceAll(name, " ", "_")) // a pool of its own
			pl, err := p.EnsurePool(t.Context(), spec, PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pl.Delete(context.Background()); p.deletePolicy(pl.Name, pl.npUID) })
			if err := edit(pl); err != nil {
				t.Fatal(err)
			}
			ws := warmSpec(t, clusterID("POOLCHANGED"))
			ws.Env = append(ws.Env, spec.Env[len(spec.Env)-1])
			if _, err := pl.Claim(t.Context(), ws, func(context.Context, string, string, string) error {
				return errors.New("bound a changed pool's pod")
			}); !errors.Is(err, ErrSlotChanged) {
				t.Fatalf("Claim from a changed pool = %v, want ErrSlotChanged", err)
			}
			if _, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(ws.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a claim was made from a changed pool: %v", err)
			}
		})
	}
}

// poolClaimerEnv makes the test binary a supervisor that claims a pool pod and is killed with
// -9 while it waits for the pod's worker (pool_cluster_test.go).
const poolClaimerEnv = "AGORA_K8S_TEST_POOL_CLAIMER"

// poolClaimer is the claimer's settings.
type poolClaimer struct {
	Opts     claimerOpts
	Sessions string
	Slots    string
	Spec     compute.Spec
	Dispatch string
	// Bound: the claimer prints the pod's uid once the pod is bound (not before) and waits
	// to be killed; PodEnd is the pods' kwok end delay (the parent's, so the pool is one).
	Bound  bool
	PodEnd string
	// Home is the pool's home ("": testHome): an older agora's identity of it, say.
	Home string
}

// claimerOpts are the provider's Options without their func and interface fields, which
// encoding/json cannot carry.
type claimerOpts struct {
	Kubeconfig, Context, Namespace, Image, WorkerImage, RuntimeClass, CPU, Memory string
	NodeSelector                                                                  map[string]string
	TTL                                                                           time.Duration
	GatewayURL                                                                    string
	GatewayPeer                                                                   *GatewayPeer
	GatewayCA                                                                     []byte
	Target, Backend                                                               string
	SandboxUID                                                                    uint32
	PullSecrets                                                                   []string
	PullPolicy                                                                    string
}

func (o claimerOpts) options() Options {
	return Options{Kubeconfig: o.Kubeconfig, Context: o.Context, Namespace: o.Namespace, Image: o.Image, WorkerImage: o.WorkerImage,
		RuntimeClass: o.RuntimeClass, CPU: o.CPU, Memory: o.Memory, NodeSelector: o.NodeSelector, TTL: o.TTL, GatewayURL: o.GatewayURL,
		GatewayPeer: o.GatewayPeer, GatewayCA: o.GatewayCA, Target: o.Target, Backend: o.Backend, SandboxUID: o.SandboxUID,
		PullSecrets: o.PullSecrets, PullPolicy: o.PullPolicy}
}

// claimerOptsOf is p's options as the claimer process takes them.
func claimerOptsOf(p *Provider) claimerOpts {
	po := p.opts
	return claimerOpts{Kubeconfig: po.Kubeconfig, Context: po.Context, Namespace: po.Namespace, Image: po.Image, WorkerImage: po.WorkerImage,
		RuntimeClass: po.RuntimeClass, CPU: po.CPU, Memory: po.Memory, NodeSelector: po.NodeSelector, TTL: po.TTL, GatewayURL: po.GatewayURL,
		GatewayPeer: po.GatewayPeer, GatewayCA: po.GatewayCA, Target: po.Target, Backend: po.Backend, SandboxUID: po.SandboxUID,
		PullSecrets: po.PullSecrets, PullPolicy: po.PullPolicy}
}

// startClaimer starts this test binary as the claimer c and returns it (killed at the test's
// end) with the uid of the pod it printed: claimed and checked, or bound when c.Bound.
func startClaimer(t *testing.T, c poolClaimer) (*exec.Cmd, string) {
	t.Helper()
	cfg, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return startChild(t, poolClaimerEnv+"="+string(cfg))
}

// startChild starts this test binary with env added (which TestMain reads to become the
// child), killed at the test's end, and returns it with the first line it printed.
func startChild(t *testing.T, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child process said nothing: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

func poolClaimerMain() int {
	var c poolClaimer
	if err := json.Unmarshal([]byte(os.Getenv(poolClaimerEnv)), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := c.Opts.options()
	o.Exporter = &netgw.Registry{Dir: c.Sessions}
	p, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	end := c.PodEnd
	if end == "" {
		end = "1h"
	}
	p.testOnlyPodMeta = failWith(0, end)
	ctx := context.Background()
	home := c.Home
	if home == "" {
		home = testHome
	}
	pl, err := p.EnsurePool(ctx, c.Spec, PoolOptions{Home: home, Replicas: 2, Places: warmPlaces})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := c.Spec
	s.ID = c.Dispatch
	s.Env = append(slotEnv(s.Env), "AGORA_DISPATCH_ID="+s.ID)
	slots := &netgw.Slots{Dir: c.Slots}
	_, err = pl.Claim(ctx, s, func(ctx context.Context, uid, dispatch, token string) error {
		if c.Bound {
			err := slots.BindPod(ctx, uid, dispatch, token)
			fmt.Printf("%s\n", uid) // bound: the pod runs the dispatch; the parent kills this process now
			return err
		}
		fmt.Printf("%s\n", uid) // claimed and checked: the parent kills this process now
		return slots.BindPod(ctx, uid, dispatch, token)
	})
	if c.Bound && err == nil {
		select {} // supervising, until the parent's SIGKILL
	}
	fmt.Fprintln(os.Stderr, "claim:", err)
	return 1
}

// A supervisor killed with -9 after its claim: the pod it claimed is never handed a dispatch
// (its worker's claim is refused once the binder is gone) nor returned to the pool; the next
// dispatch gets another pod.
func TestAgentSandboxPool_Kill9AfterClaimNeverReused(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	tmpl := poolSpec(t, "TEMPLATE", "kill9")
	pl, err := p.EnsurePool(t.Context(), tmpl, PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 2, nil))
	// The workers wait with their slot tokens; the killed supervisor's pod must refuse its.
	for _, pp := range pods {
		pp.claim()
		<-pp.got
	}
	killedID := clusterID("POOLKILLED")
	cmd, killedUID := startClaimer(t, poolClaimer{Opts: claimerOptsOf(p), Sessions: g.reg.Dir, Slots: g.slots.Dir, Spec: tmpl, Dispatch: killedID})
	killed, ok := pods[killedUID]
	if !ok {
		t.Fatalf("the killed supervisor claimed pod %s, not one the test enrolled", killedUID)
	}
	// It listens for the pod's worker: the bind's socket is in the pod's slot.
	agoratest.WaitFor(t, time.Minute, "the supervisor's bind to listen", func() bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, killed.slot.Slot, "c"))
		return err == nil
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	if d := <-workerClaims(rctx, g, killed.slot.Slot, killed.slot.Token); !strings.HasPrefix(d, "refused: ") {
		t.Errorf("the killed supervisor's pod's worker was handed %q", d)
	}
	// Its Sandbox stays the killed dispatch's claim's, never the pool's again.
	sb, err := admin.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), killed.pod.Name, metav1.GetOptions{})
	if err == nil {
		if ref, ok := controllerRef(sb.OwnerReferences); !ok || ref.Kind != "SandboxClaim" {
			t.Errorf("the killed supervisor's pod's Sandbox is controlled by %+v, want its claim", ref)
		}
	}
	t.Cleanup(func() {
		if c, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(context.Background(), objectName(killedID), metav1.GetOptions{}); err == nil {
			admin.deleteClaim(c.Name, c.UID)
		}
	})
	// The next dispatch: another pod (every ready one of the pool waits for it).
	next := armPool(t, g, cs, admin, pl.Name, 2, map[string]bool{killedUID: true}, pods)
	id := clusterID("POOLAFTERKILL")
	h, err := pl.Claim(t.Context(), poolSpec(t, id, "kill9"), g.slots.BindPod)
	if err != nil {
		t.Fatal(err)
	}
	if got := handedTo(t, next, id); string(got.pod.UID) == killedUID {
		t.Fatal("the killed supervisor's pod was handed the next dispatch")
	}
	p.Cancel(t.Context(), h.TaskID())
	waitTimeout(t, h, 3*time.Minute)
}
