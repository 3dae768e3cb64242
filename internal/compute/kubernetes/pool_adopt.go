package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// AdoptPooled is [Pool.Adopt] for a supervisor host that knows of the dispatch only its spec
// and its home: the pool adopted from is home o.Home's pool of the dispatch's shape or, when the
// dispatch's SandboxClaim names it, the pool of that shape an older agora of the same home made
// under one of former (its identity was computed otherwise then: dispatch.k8sHomes), so a
// pooled dispatch claimed before an upgrade is not lost by it. A pool's name hashes its home,
// so a claim naming another home's pool matches none of these and is refused as Pool.Adopt
// refuses a claim of another pool; everything is then checked against the pool as agora builds
// it for the home it was made under (its labels, audience and pod template).
//
// The pool's template need not stand (its holder deleted the pool at its close, or the sweep
// deleted a former identity's pool): the claimed Sandbox and pod are checked against the pod
// spec agora builds, not against the template, and the pool's policy, which confines the pod
// and stands while a Sandbox of the pool does, must be there as made. nil, nil: no claim, no
// policy of that pool, or a claim whose Sandbox never carried the dispatch (Pool.Adopt).
func (p *Provider) AdoptPooled(ctx context.Context, s compute.Spec, o PoolOptions, former []string) (compute.Handle, error) {
	if err := checkDispatchID(s.ID); err != nil {
		return nil, err
	}
	for _, h := range append([]string{o.Home}, former...) {
		if !validHome(h) {
			return nil, fmt.Errorf("adopt %q from a warm pool: home %q: want [a-z0-9], 1 to %d bytes", s.ID, h, maxName)
		}
	}
	if len(former) > 0 {
		claim, err := p.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(ctx, objectName(s.ID), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("adopt %q: look for its sandbox claim: %w", s.ID, err)
		}
		shape := s
		shape.ID = "" // as OpenPool names the pool
		for _, h := range former {
			fo := o
			fo.Home = h
			if claim.Labels[labelPool] == p.PoolName(shape, fo) {
				o = fo
				break
			}
		}
	}
	pl, err := p.openPool(ctx, s, o, false)
	if errors.Is(err, ErrNoPool) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return pl.Adopt(ctx, s)
}

// Adopt is [Provider.Adopt] for a dispatch that [Pool.Claim] ran in a pod of this pool, for
// a supervisor host whose dispatch's first supervisor died: the pod is found through the
// dispatch's SandboxClaim (named for the dispatch) and the Sandbox the controller handed it,
// checked as the claim checked it (the claim's, from the pool, the pool's pod template, the
// pod the Sandbox's own), and followed to its end with the gateway session taken back; the
// claim goes when it ends, as it would have. Nothing is created, bound or exported.
//
// nil, nil: no such claim, or its Sandbox never carried the dispatch (the first supervisor
// died before it bound the pod, so the pod never ran the dispatch): the caller ends it lost
// and its Cancel or the next Sweep deletes the claim. The pod followed is the one the
// dispatch was bound to (the Sandbox's annotationBoundPod): a pod the controller made the
// Sandbox since is a replacement and is not adopted.
func (pl *Pool) Adopt(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	p := pl.p
	if err := checkDispatchID(s.ID); err != nil {
		return nil, err
	}
	if SlotShape(s) != SlotShape(pl.spec) {
		return nil, fmt.Errorf("adopt %q: the dispatch's shape is not pool %s's", s.ID, pl.Name)
	}
	name := objectName(s.ID)
	defer p.lockStart(name)()
	claim, err := p.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("adopt %q: look for its sandbox claim: %w", s.ID, err)
	case !ownedBy(claim.Labels, s.ID) || claim.Labels[labelPool] != pl.Name:
		return nil, fmt.Errorf("adopt %q: sandbox claim %q is not agora's for this dispatch in pool %s; refusing to touch it", s.ID, name, pl.Name)
	case claim.DeletionTimestamp != nil:
		return nil, nil
	}
	sb, err := pl.claimedSandbox(ctx, s.ID, claim)
	if sb == nil || err != nil {
		return nil, err
	}
	pod, err := pl.boundPod(ctx, sb)
	if err != nil {
		return nil, fmt.Errorf("adopt %q: refusing to adopt: %w", s.ID, err)
	}
	var sess *remote.Session
	if r, ok := p.opts.Exporter.(Reattacher); ok && !p.hasSession(sb.Name) {
		if sess, err = r.Reattach(ctx, s); err != nil {
			return nil, fmt.Errorf("adopt %q: re-attach to the gateway session: %w", s.ID, err)
		}
	}
	start := claim.CreationTimestamp.Time
	var deadline time.Time
	if t := s.Limits.Timeout; t > 0 {
		deadline = start.Add(t)
	}
	h := &handle{p: p, id: s.ID, name: sb.Name, uid: sb.UID, taskID: formatTaskID(p.ns, sb.Name), sess: sess,
		stderr: s.Stderr, start: start, done: make(chan struct{}), sandbox: true,
		claim: claim.Name, claimUID: claim.UID, pool: pl.Name, deadline: deadline, podUID: pod.UID}
	if sess != nil {
		p.holdSession(sb.Name)
	}
	go h.run(ctx)
	return h, nil
}

// claimedSandbox is the Sandbox the controller handed claim, once the claim's supervisor
// labelled it the dispatch's (it does so before it binds the pod); nil when none is.
func (pl *Pool) claimedSandbox(ctx context.Context, id string, claim *claimObject) (*sandboxObject, error) {
	p := pl.p
	l, err := p.client.AgentsV1beta1().Sandboxes(p.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy + "," + labelDispatch + "=" + id})
	if err != nil {
		return nil, fmt.Errorf("adopt %q: list its sandbox: %w", id, err)
	}
	var found *sandboxObject
	for i := range l.Items {
		sb := &l.Items[i]
		if !controlledBy(sb.OwnerReferences, "SandboxClaim", claim.Name, claim.UID) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("adopt %q: two sandboxes of its claim carry it (%s, %s); refusing to adopt", id, found.Name, sb.Name)
		}
		found = sb
	}
	if found == nil || found.Annotations[annotationBoundPod] == "" {
		return nil, nil
	}
	switch {
	case found.Labels[launchTypeLabel] != "warm":
		return nil, fmt.Errorf("adopt %q: sandbox %s was made cold for the claim, not taken from the pool", id, found.Name)
	case found.Spec.Service == nil || *found.Spec.Service:
		return nil, fmt.Errorf("adopt %q: sandbox %s's spec.service is not false", id, found.Name)
	}
	if err := p.checkPoolPod(found.Spec.PodTemplate.Metadata.Labels, found.Spec.PodTemplate.Metadata.Annotations, &found.Spec.PodTemplate.Spec, pl.spec, pl.Name, pl.home); err != nil {
		return nil, fmt.Errorf("adopt %q: %w", id, err)
	}
	if specHash(found.Spec.PodTemplate.Spec) != pl.podSum {
		return nil, fmt.Errorf("adopt %q: sandbox %s's pod template is not the pool's", id, found.Name)
	}
	return found, nil
}

// boundPod is sb's pod, the one its dispatch was bound to, held to sb's checked template as
// the claim held it. A pod that ended is followed too: its end is the dispatch's.
func (pl *Pool) boundPod(ctx context.Context, sb *sandboxObject) (*corev1.Pod, error) {
	pod, err := pl.p.client.CoreV1().Pods(pl.p.ns).Get(ctx, sb.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("sandbox %s has no pod: the pod its dispatch was bound to is gone", sb.Name)
	case err != nil:
		return nil, err
	case !controlledBy(pod.OwnerReferences, "Sandbox", sb.Name, sb.UID):
		return nil, fmt.Errorf("pod %s is not its sandbox's", pod.Name)
	case pod.UID != types.UID(sb.Annotations[annotationBoundPod]):
		return nil, fmt.Errorf("pod %s (uid %s) is not the pod the dispatch was bound to (%s): a replacement", pod.Name, pod.UID, sb.Annotations[annotationBoundPod])
	case len(pod.Spec.EphemeralContainers) != 0:
		return nil, fmt.Errorf("pod %s was given an ephemeral container", pod.Name)
	}
	if err := pl.podMatches(pod, &sb.Spec.PodTemplate.Spec); err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return pod, nil
}
