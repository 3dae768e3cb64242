package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// PoolVerifier verifies the projected tokens pool pods enrol with (netgw.PodVerifier): the
// gateway of home serves it for each `backend: agent-sandbox` target with warm slots.
type PoolVerifier struct {
	P    *Provider
	Home string
	// Former are identities this same home's pools carried under an older agora (its identity
	// was computed otherwise then: dispatch.k8sHomes): a pod of a pool made before an upgrade
	// enrols with a token of its former audience. Each audience is accepted only for a pod and
	// pool labelled with its own identity, and never another home's.
	Former []string
	// Pools are the pools agora makes for this home's targets, by name, with their pods'
	// spec digest (Provider.PoolSum of each pool target's template, under each identity of
	// the home). A pod enrols only if its pool is one of them and its Sandbox's pod template
	// is that pool's as agora builds it: labels alone can be written by whoever may create
	// SandboxTemplates and SandboxWarmPools, whose lookalike pool's pods would enrol, a slot
	// each. nil knows no pool: every pod is refused.
	Pools func(context.Context) (map[string]string, error)
}

// The TokenReview's extra keys naming the pod a token is bound to.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// VerifyPod asks the apiserver (TokenReview, for the home's gateway audiences alone: its
// current identity's and its former ones') whom token names, and accepts it only when that is a
// pod bound token of the pool's ServiceAccount in the target's namespace, for a pod that exists
// with that uid, is not being deleted, has not run its worker yet (Pending or Running), carries
// the labels of one of home's pools under the identity the token's audience is for, runs as the
// pool's ServiceAccount, and is the pod (named after it) of a Sandbox that pool still holds
// (unclaimed): the pool, the Sandbox and the pod by uid. Its errors never carry the token.
func (v PoolVerifier) VerifyPod(ctx context.Context, token string) (remote.PodIdentity, error) {
	p := v.P
	homes := append([]string{v.Home}, v.Former...)
	auds := make([]string, len(homes))
	for i, h := range homes {
		if !validHome(h) {
			return remote.PodIdentity{}, fmt.Errorf("pool verifier: home %q is not valid", h)
		}
		auds[i] = PoolAudience(h)
	}
	// One review for every identity of the home: the apiserver answers with those of the
	// token's audiences it asked for, and the pod must then be of a pool of one of them.
	tr, err := p.client.TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: auds}}, metav1.CreateOptions{})
	if err != nil {
		return remote.PodIdentity{}, fmt.Errorf("token review: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		return remote.PodIdentity{}, errors.New("the apiserver did not authenticate the token for the gateway's audience")
	}
	var forHomes []string
	for i, aud := range auds {
		if slices.Contains(st.Audiences, aud) {
			forHomes = append(forHomes, homes[i])
		}
	}
	if len(forHomes) == 0 {
		return remote.PodIdentity{}, errors.New("the token is not for the gateway's audience")
	}
	if want := "system:serviceaccount:" + p.ns + ":" + PoolServiceAccount; st.User.Username != want {
		return remote.PodIdentity{}, fmt.Errorf("the token is %q's, not the pool's ServiceAccount's", st.User.Username)
	}
	name, uid := st.User.Extra[extraPodName], st.User.Extra[extraPodUID]
	if len(name) != 1 || len(uid) != 1 || !remote.ValidPodUID(uid[0]) {
		return remote.PodIdentity{}, errors.New("the token is not bound to a pod")
	}
	id := remote.PodIdentity{Namespace: p.ns, Name: name[0], UID: uid[0]}
	if err := v.poolPod(ctx, id, forHomes); err != nil {
		return remote.PodIdentity{}, fmt.Errorf("pod %s/%s: %w", id.Namespace, id.Name, err)
	}
	return id, nil
}

// poolPod checks that id is a live, unclaimed pod of a pool of one of homes (the identities
// of this home the token's audience is for), the pod and its pool labelled with the same one.
func (v PoolVerifier) poolPod(ctx context.Context, id remote.PodIdentity, homes []string) error {
	p := v.P
	pod, err := p.client.CoreV1().Pods(p.ns).Get(ctx, id.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		return err
	case string(pod.UID) != id.UID:
		return errors.New("the token is bound to an earlier pod of that name")
	case pod.DeletionTimestamp != nil:
		return errors.New("the pod is being deleted")
	case pod.Status.Phase != corev1.PodPending && pod.Status.Phase != corev1.PodRunning:
		return fmt.Errorf("the pod is %s", pod.Status.Phase)
	case pod.Spec.ServiceAccountName != PoolServiceAccount:
		return fmt.Errorf("the pod runs as service account %q", pod.Spec.ServiceAccountName)
	case pod.Labels[labelManagedBy] != managedBy || !slices.Contains(homes, pod.Labels[labelHome]) || len(pod.Labels[labelPool]) <= len(poolPrefix):
		return errors.New("the pod does not carry the labels of a pool of this home's")
	}
	pool, home := pod.Labels[labelPool], pod.Labels[labelHome]
	sbRef, ok := controllerRef(pod.OwnerReferences)
	if !ok || sbRef.Kind != "Sandbox" || sbRef.APIVersion != agentsGroupVersion.String() {
		return errors.New("the pod is not a Sandbox's")
	}
	if sbRef.Name != pod.Name {
		// agent-sandbox names a Sandbox's pod after it. Anyone who may create pods can name
		// a pool's Sandbox as their pod's controller (the apiserver checks no ownerReference
		// made without blockOwnerDeletion): such a lookalike would enrol, a slot each.
		return errors.New("the pod is not its Sandbox's own pod (it is not named after it)")
	}
	sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(ctx, sbRef.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("its sandbox: %w", err)
	case sb.UID != sbRef.UID || sb.DeletionTimestamp != nil:
		return errors.New("its sandbox was replaced or is being deleted")
	}
	poolRef, ok := controllerRef(sb.OwnerReferences)
	if !ok || poolRef.Kind != "SandboxWarmPool" || poolRef.Name != pool || poolRef.APIVersion != extGroupVersion.String() {
		// A claim adopted it (a claim of someone else's, or agora's own taking a pod that had
		// not enrolled yet): a claimed pod never enrols.
		return errors.New("its sandbox is not held by the pool (it was claimed, or is another's)")
	}
	wp, err := p.client.ExtensionsV1beta1().SandboxWarmPools(p.ns).Get(ctx, pool, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("its pool: %w", err)
	case wp.UID != poolRef.UID || wp.Labels[labelManagedBy] != managedBy || wp.Labels[labelPool] != pool || wp.Labels[labelHome] != home:
		return errors.New("its pool is not this home's")
	}
	if v.Pools == nil {
		return errors.New("the gateway knows no pool of this home's")
	}
	known, err := v.Pools(ctx)
	if err != nil {
		return fmt.Errorf("this home's pools: %w", err)
	}
	sum, ok := known[pool]
	switch {
	case !ok:
		return fmt.Errorf("its pool %s is not one agora makes for this home's targets", pool)
	case specHash(sb.Spec.PodTemplate.Spec) != sum:
		return errors.New("its sandbox's pod template is not its pool's as agora makes it")
	}
	return nil
}

// controllerRef returns refs' controller.
func controllerRef(refs []metav1.OwnerReference) (metav1.OwnerReference, bool) {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}
