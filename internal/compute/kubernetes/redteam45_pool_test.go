package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/fence"
)

// Attacks on the former-identity pool changes (PoolVerifier.Former, AdoptPooled,
// DeleteFormerPools) on the real control plane with agent-sandbox's real controller, by
// someone who did not build them. The attacker may create pods, Sandboxes and
// NetworkPolicies and change labels in the namespace; agora's verifier, adopter and sweep run
// as agora's ServiceAccount.

// relabel sets the labels of pod name (as the admin: anyone who may patch pods).
func rt45Relabel(t *testing.T, cs *kubernetes.Clientset, ns, name string, set map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": set}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Pods(ns).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("relabel pod %s: %v", name, err)
	}
	for k, v := range set {
		if got.Labels[k] != v {
			t.Fatalf("pod %s's label %s after the relabel: %q, want %q", name, k, got.Labels[k], v)
		}
	}
}

// rt45Token is a token of service account sa for audience, bound to pod when pod is not nil.
func rt45Token(t *testing.T, cs *kubernetes.Clientset, ns, sa string, pod *corev1.Pod, audience string) (string, error) {
	t.Helper()
	spec := authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptrTo(int64(poolTokenExpiry))}
	if pod != nil {
		spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// rt45Pod makes pod (as the admin: anyone who may create pods) and deletes it at the end.
func rt45Pod(t *testing.T, admin *Provider, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	made, err := admin.client.CoreV1().Pods(admin.ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("make pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() {
		admin.client.CoreV1().Pods(made.Namespace).Delete(context.Background(), made.Name, metav1.DeleteOptions{})
	})
	return made
}

// Attacks on the verifier's former audience, each refused, with the former pool's own pod
// accepted throughout (so the refusals are of the attacks, not of a broken verifier):
//   - the current pool's pod presenting a token of the former audience;
//   - a pod the attacker made with the former pool's labels, its ServiceAccount and a token of
//     the former audience, but no owner (not made by agora's pool);
//   - the same under another pool's name (the current pool's, with the former home label);
//   - a token of the former audience of another ServiceAccount, bound to the former pod when
//     the apiserver allows it, else unbound;
//   - another home's pool pod relabelled with the former identity (its pool label kept, then
//     its pool label also set to the former pool's), with a token of the former audience;
//   - the former pool's pod relabelled with the current identity, with a current token;
//   - an empty former identity, and one equal to nothing valid.
func TestRedteam45Pool_VerifierFormerAudienceAttacks(t *testing.T) {
	_, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	former := ensureTestPool(t, p, "rt45-verify", formerTestHome, 1)
	current := ensureTestPool(t, p, "rt45-verify", testHome, 1)
	other := ensureTestPool(t, p, "rt45-verify", otherTestHome, 1)
	fpod := readyPoolPods(t, admin, former.Name, 1, nil)[0]
	cpod := readyPoolPods(t, admin, current.Name, 1, nil)[0]
	opod := readyPoolPods(t, admin, other.Name, 1, nil)[0]
	v := PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{formerTestHome}}
	ctx := t.Context()
	formerAud, currentAud := PoolAudience(formerTestHome), PoolAudience(testHome)

	accepts := func(what string, pod *corev1.Pod, aud string) {
		t.Helper()
		if id, err := v.VerifyPod(ctx, mintPodToken(t, cs, pod, aud)); err != nil || id.UID != string(pod.UID) {
			t.Fatalf("%s = %+v, %v; want pod %s accepted", what, id, err, pod.Name)
		}
	}
	refused := func(what, jwt string) {
		t.Helper()
		if id, err := v.VerifyPod(ctx, jwt); err == nil {
			pod, _ := cs.CoreV1().Pods(admin.ns).Get(ctx, id.Name, metav1.GetOptions{})
			t.Errorf("%s was accepted as %+v (its labels now %v)", what, id, pod.Labels)
		} else if strings.Contains(err.Error(), jwt) {
			t.Errorf("%s: the refusal carries the token", what)
		}
	}
	accepts("the former pool's pod with the former audience", &fpod, formerAud)
	accepts("the current pool's pod with the current audience", &cpod, currentAud)

	refused("the current pool's pod with a token of the former audience", mintPodToken(t, cs, &cpod, formerAud))

	// A pod the attacker made: the former pool's labels and ServiceAccount, no owner.
	orphan := rt45Pod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "rt45-orphan-former", Namespace: admin.ns, Labels: rt45Copy(fpod.Labels)}, Spec: *fpod.Spec.DeepCopy()})
	refused("a pod with the former pool's labels made by no pool", mintPodToken(t, cs, orphan, formerAud))
	// The same claiming the current pool's name under the former identity, owned by the
	// current pool's Sandbox (the lookalike that pool_verify.go refuses by its name, under the
	// former label).
	lbl := rt45Copy(fpod.Labels)
	lbl[labelPool] = current.Name
	look := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rt45-lookalike-former", Namespace: admin.ns, Labels: lbl,
		OwnerReferences: slices.Clone(cpod.OwnerReferences)}, Spec: *fpod.Spec.DeepCopy()}
	for i := range look.OwnerReferences {
		look.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	look = rt45Pod(t, admin, look)
	refused("a pod under the current pool's name with the former label", mintPodToken(t, cs, look, formerAud))
	refused("the same with a token of the current audience", mintPodToken(t, cs, look, currentAud))

	// Another ServiceAccount's token for the former audience.
	sa, err := cs.CoreV1().ServiceAccounts(admin.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "rt45-other-sa"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().ServiceAccounts(admin.ns).Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	if jwt, err := rt45Token(t, cs, admin.ns, sa.Name, &fpod, formerAud); err == nil {
		refused("another ServiceAccount's token for the former audience bound to the former pod", jwt)
	} else {
		t.Logf("the apiserver refused another ServiceAccount's token bound to the former pod: %v", err)
	}
	if jwt, err := rt45Token(t, cs, admin.ns, sa.Name, nil, formerAud); err != nil {
		t.Fatal(err)
	} else {
		refused("another ServiceAccount's unbound token for the former audience", jwt)
	}
	if jwt, err := rt45Token(t, cs, admin.ns, PoolServiceAccount, nil, formerAud); err != nil {
		t.Fatal(err)
	} else {
		refused("the pool ServiceAccount's token for the former audience bound to no pod", jwt)
	}

	// Relabels: another home's pod taking the former identity.
	rt45Relabel(t, cs, admin.ns, opod.Name, map[string]string{labelHome: formerTestHome})
	refused("another home's pool pod relabelled with the former identity", mintPodToken(t, cs, &opod, formerAud))
	rt45Relabel(t, cs, admin.ns, opod.Name, map[string]string{labelPool: former.Name})
	refused("another home's pool pod relabelled as the former pool's", mintPodToken(t, cs, &opod, formerAud))
	// The former pod taking the current identity.
	accepts("the former pool's pod, before its relabel", &fpod, formerAud)
	rt45Relabel(t, cs, admin.ns, fpod.Name, map[string]string{labelHome: testHome})
	// agent-sandbox's controller puts a pod's labels back from its Sandbox's template soon
	// after, so this is refused whichever labels the verifier reads: the pod's pool is
	// labelled with the former identity, and a current token is for the current one alone.
	refused("the former pool's pod relabelled with the current identity, a current token", mintPodToken(t, cs, &fpod, currentAud))

	jwt := mintPodToken(t, cs, &cpod, currentAud)
	for _, bad := range [][]string{{""}, {"Not/Valid"}, {formerTestHome, ""}} {
		if id, err := (PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: bad}).VerifyPod(ctx, jwt); err == nil {
			t.Errorf("a verifier with former identities %q accepted %+v", bad, id)
		}
	}
}

// rt45Copy is a copy of m.
func rt45Copy(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Attack: someone who may create Sandboxes makes one whose controller is the former pool's
// SandboxWarmPool (an ownerReference without blockOwnerDeletion, which the apiserver does not
// check), its pod template labelled as the pool's pods are, running the pool's ServiceAccount
// with a command of their own. The controller makes its pod, named after it; the pod's token
// of the former audience names a pod of a Sandbox the former pool holds. It must not enrol:
// its pod template is not the pool's. The same against the current pool (the check is the
// identity's, not the former's alone).
func TestRedteam45Pool_PlantedSandboxOfThePoolNeverEnrols(t *testing.T) {
	_, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ctx := t.Context()
planted:
	for _, c := range []struct{ home, tag string }{{formerTestHome, "rt45-planted-f"}, {testHome, "rt45-planted-c"}} {
		pl := ensureTestPool(t, p, c.tag, c.home, 1)
		real := readyPoolPods(t, admin, pl.Name, 1, nil)[0]
		realSB, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Get(ctx, real.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v := PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{formerTestHome}}
		if _, err := v.VerifyPod(ctx, mintPodToken(t, cs, &real, PoolAudience(c.home))); err != nil {
			t.Fatalf("the %s pool's own pod refused: %v", c.home, err)
		}
		tmpl := realSB.Spec.PodTemplate
		tmpl.Spec = *tmpl.Spec.DeepCopy()
		tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo attacker"}
		refs := slices.Clone(realSB.OwnerReferences)
		for i := range refs {
			refs[i].BlockOwnerDeletion = nil
		}
		planted := &sandboxObject{TypeMeta: realSB.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Name: "rt45-planted-" + c.home, Namespace: admin.ns, Labels: rt45Copy(realSB.Labels), OwnerReferences: refs},
			Spec: sandboxSpec{PodTemplate: tmpl, Service: ptrTo(false)}}
		made, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Create(ctx, planted, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("plant a Sandbox under pool %s: %v", pl.Name, err)
		}
		t.Cleanup(func() {
			admin.client.AgentsV1beta1().Sandboxes(admin.ns).Delete(context.Background(), made.Name, metav1.DeleteOptions{})
		})
		// The pool holds one more Sandbox than its replicas: its controller trims one. The
		// pool's own goes (as a claim takes it, or an eviction), so the planted one is the
		// pool's count and stays. The controller may trim the pool's own first: gone either way.
		if err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Delete(ctx, realSB.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete the pool's own Sandbox: %v", err)
		}
		var pod *corev1.Pod
		var deleted bool
		if err := agoratest.Await(time.Minute, func() error {
			got, err := admin.client.CoreV1().Pods(admin.ns).Get(ctx, made.Name, metav1.GetOptions{})
			switch {
			case err == nil && (got.Status.Phase == corev1.PodRunning || got.Status.Phase == corev1.PodPending):
				pod = got
				return nil
			case apierrors.IsNotFound(err):
				// The controller deletes a Sandbox of the pool it did not make (the pool is at
				// its count), often before it makes its pod: the attack ends there.
				if _, serr := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Get(ctx, made.Name, metav1.GetOptions{}); apierrors.IsNotFound(serr) {
					deleted = true
					return nil
				}
			}
			if err == nil {
				err = fmt.Errorf("its pod is %s", got.Status.Phase)
			}
			return err
		}); err != nil {
			t.Skipf("SKIP: the controller made no pod of the planted Sandbox in 1m (%v): nothing to present", err)
		}
		if deleted {
			t.Logf("the planted Sandbox under the %s pool was deleted before its pod ran", c.home)
			continue planted
		}
		if sb, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).Get(ctx, made.Name, metav1.GetOptions{}); err == nil {
			ref, _ := controllerRef(sb.OwnerReferences)
			t.Logf("planted Sandbox %s's controller %s/%s; its pod %s %s", made.Name, ref.Kind, ref.Name, pod.Name, pod.Status.Phase)
		}
		// agent-sandbox's controller deletes a Sandbox of the pool it did not make (the pool
		// is at its count), often before its pod can have a token: the attack ends there.
		jwt, err := rt45Token(t, cs, admin.ns, PoolServiceAccount, pod, PoolAudience(c.home))
		if err != nil {
			t.Logf("the planted Sandbox's pod under the %s pool went before its token: %v", c.home, err)
			continue
		}
		id, err := v.VerifyPod(ctx, jwt)
		t.Logf("the planted Sandbox's pod under the %s pool: %+v, %v", c.home, id, err)
		if err == nil {
			t.Errorf("the pod of a Sandbox planted under the %s pool %s (its own command) enrolled as %+v", c.home, pl.Name, id)
		}
	}
}

// Attacks on DeleteFormerPools through the policies it lists: another home's pool policy and
// the current pool's policy relabelled with the former identity; a policy the attacker made
// for a template of their own under another home's name; a template of the former pool's name
// the attacker made again (another uid, not agora's labels). None of their templates is
// deleted; the former pool's own is. Then an empty or malformed identity is refused.
func TestRedteam45Pool_DeleteFormerPoolsCraftedPolicies(t *testing.T) {
	_, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ctx := t.Context()
	former := ensureTestPool(t, p, "rt45-delete", formerTestHome, 0)
	current := ensureTestPool(t, p, "rt45-delete", testHome, 0)
	other := ensureTestPool(t, p, "rt45-delete", otherTestHome, 0)

	// Relabel the other home's and the current pool's policies with the former identity.
	for _, pl := range []*Pool{other, current} {
		np, err := cs.NetworkingV1().NetworkPolicies(admin.ns).Get(ctx, pl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np.Labels[labelHome] = formerTestHome
		if _, err := cs.NetworkingV1().NetworkPolicies(admin.ns).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("relabel policy %s: %v", pl.Name, err)
		}
	}
	// A policy under a pool-like name, labelled with the former identity, whose template (of
	// the same name) is labelled with another home.
	fake := poolPrefix + "rt45fakeothertemplate"
	tmpl, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ft := &templateObject{extObject{TypeMeta: tmpl.TypeMeta, Spec: tmpl.Spec,
		ObjectMeta: metav1.ObjectMeta{Name: fake, Namespace: admin.ns, Labels: rt45Copy(tmpl.Labels), Annotations: tmpl.Annotations}}}
	ft.Labels[labelPool] = fake
	if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Create(ctx, ft, metav1.CreateOptions{}); err != nil {
		t.Fatalf("make template %s: %v", fake, err)
	}
	t.Cleanup(func() {
		admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Delete(context.Background(), fake, metav1.DeleteOptions{})
	})
	fnp := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fake, Namespace: admin.ns,
		Labels: map[string]string{labelManagedBy: managedBy, labelPool: fake, labelHome: formerTestHome}},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := cs.NetworkingV1().NetworkPolicies(admin.ns).Create(ctx, fnp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.NetworkingV1().NetworkPolicies(admin.ns).Delete(context.Background(), fake, metav1.DeleteOptions{})
	})

	for _, bad := range []string{"", "Not/Valid", strings.Repeat("a", 200)} {
		if gone, err := p.DeleteFormerPools(ctx, bad); err == nil {
			t.Errorf("DeleteFormerPools(%q) = %v, nil; want refused", bad, gone)
		}
	}
	gone, err := p.DeleteFormerPools(ctx, formerTestHome)
	if err != nil {
		t.Fatalf("DeleteFormerPools: %v", err)
	}
	if !slices.Equal(gone, []string{former.Name}) {
		t.Errorf("DeleteFormerPools deleted %v; want the former pool %s alone", gone, former.Name)
	}
	for _, name := range []string{other.Name, current.Name, fake} {
		if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("template %s after DeleteFormerPools: %v; want it standing", name, err)
		}
	}
	// The sweep of the former identity takes none of the relabelled policies: their pools stand.
	swept, err := p.SweepPools(ctx, formerTestHome, func(string) bool { return false })
	if err != nil {
		t.Fatalf("SweepPools: %v", err)
	}
	for _, name := range []string{other.Name, current.Name, fake} {
		if slices.Contains(swept, name) {
			t.Errorf("SweepPools of the former identity deleted policy %s, whose pool stands", name)
		}
	}
}

// rt45Spec is spec with id, as a dispatch's.
func rt45Spec(s compute.Spec, id string) compute.Spec {
	s.ID = id
	return s
}

// AdoptPooled given a malformed former identity refuses before looking at anything.
func TestRedteam45Pool_AdoptPooledMalformedFormer(t *testing.T) {
	_, p, _, _ := poolSetup(t)
	s := rt45Spec(poolSpec(t, "TEMPLATE", "rt45-adopt-bad"), clusterID("RT45BAD"))
	for _, bad := range [][]string{{""}, {"Not/Valid"}, {formerTestHome, ""}} {
		if h, err := p.AdoptPooled(t.Context(), s, PoolOptions{Home: testHome, Places: warmPlaces}, bad); h != nil || err == nil {
			t.Errorf("AdoptPooled with former %q = %v, %v; want refused", bad, h, err)
		}
	}
}

// rt45PatchClaimPool sets the pool label of dispatch id's SandboxClaim (anyone who may patch
// claims).
func rt45PatchClaimPool(t *testing.T, admin *Provider, id, pool string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{labelPool: pool}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.client.ExtensionsV1beta1().SandboxClaims(admin.ns).Patch(t.Context(), objectName(id), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("relabel the claim of %s: %v", id, err)
	}
}

// A pre-upgrade pooled dispatch (claimed and bound under the former identity, its supervisor
// killed with -9, its former pool deleted by the sweep) and attacks on its adoption, each
// refused (no handle): its claim relabelled as the current pool's, as another home's pool,
// and as no pool; the former pool's policy changed (it confines the pod: adopting under a
// changed one would follow a pod agora no longer confines). With the claim and policy put
// back, the adoption follows the bound pod to its end (the refusals were the attacks').
func TestRedteam45Pool_AdoptFormerClaimAttacks(t *testing.T) {
	u := preUpgradePooled(t, "rt45-adopt", "RT45ADOPT", 1)
	p, admin, cs, tmpl, opts, former, current, id := u.p, u.admin, u.cs, u.tmpl, u.opts, u.former, u.current, u.id

	s := tmpl
	s.ID = id
	s.Env = append(slotEnv(s.Env), "AGORA_DISPATCH_ID="+id)
	otherFormer := p.PoolName(rt45Spec(tmpl, ""), opts(otherTestHome))
	for _, pool := range []string{current.Name, otherFormer, "agora-pool-none"} {
		rt45PatchClaimPool(t, admin, id, pool)
		if h, err := p.AdoptPooled(t.Context(), s, opts(testHome), []string{formerTestHome}); h != nil {
			t.Errorf("the claim relabelled as pool %s was adopted (err %v)", pool, err)
		} else {
			t.Logf("the claim relabelled as pool %s: %v", pool, err)
		}
	}
	rt45PatchClaimPool(t, admin, id, former.Name)

	np, err := cs.NetworkingV1().NetworkPolicies(admin.ns).Get(t.Context(), former.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was := np.Spec.DeepCopy()
	np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
	if np, err = cs.NetworkingV1().NetworkPolicies(admin.ns).Update(t.Context(), np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := p.AdoptPooled(t.Context(), s, opts(testHome), []string{formerTestHome}); h != nil || !errors.Is(err, ErrSlotChanged) {
		t.Errorf("adopted under the former pool's changed policy (allow all egress): %v, %v; want refused, %v", h, err, ErrSlotChanged)
	}
	np.Spec = *was
	if _, err := cs.NetworkingV1().NetworkPolicies(admin.ns).Update(t.Context(), np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	h, err := p.AdoptPooled(t.Context(), s, opts(testHome), []string{formerTestHome})
	if err != nil || h == nil {
		t.Fatalf("AdoptPooled with the claim and policy put back = %v, %v; want the bound pod followed", h, err)
	}
	if exit := waitTimeout(t, h, 4*time.Minute); exit.Code != 0 || exit.Lost {
		t.Errorf("adopted exit = %+v, want the pod's end, code 0", exit)
	}
}

// Attack: between DeleteFormerPools reading the former pool's template and deleting it, the
// template is deleted and made again under the same name (another uid: a holder of the older
// agora making its pool again, or anyone who may make templates). The delete is by the uid
// read, so the new template stands and is not reported deleted.
func TestRedteam45Pool_DeleteFormerPoolsTemplateRemade(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	ctx := t.Context()
	former := ensureTestPool(t, p, "rt45-remade", formerTestHome, 0)
	tmpl, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Get(ctx, former.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var remadeUID types.UID
	restore := fence.Set(func() error {
		if remadeUID != "" {
			return nil
		}
		tpls := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns)
		if err := tpls.Delete(ctx, tmpl.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the template: %v", err)
			return nil
		}
		waitGone(t, "the first template", func() error { _, err := tpls.Get(ctx, tmpl.Name, metav1.GetOptions{}); return err })
		remade := &templateObject{extObject{TypeMeta: tmpl.TypeMeta, Spec: tmpl.Spec,
			ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: tmpl.Namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations}}}
		made, err := tpls.Create(ctx, remade, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("make the template again: %v", err)
			return nil
		}
		remadeUID = made.UID
		return nil
	})
	defer restore()
	gone, err := p.DeleteFormerPools(ctx, formerTestHome)
	restore()
	if err != nil || slices.Contains(gone, former.Name) {
		t.Errorf("DeleteFormerPools = %v, %v; want the remade template %s neither deleted nor reported", gone, err, former.Name)
	}
	got, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Get(ctx, former.Name, metav1.GetOptions{})
	if err != nil || got.UID != remadeUID || got.DeletionTimestamp != nil {
		t.Errorf("the remade template after DeleteFormerPools: %v (uid %v, want %v)", err, got, remadeUID)
	}
}
