package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// createSandbox is create's last steps for the agent-sandbox backend: the Sandbox in place of
// the Job (its NetworkPolicy and Secret exist already, so its pod is confined and has its token
// from the start), then the Sandbox becomes their owner, as the Job would.
func (p *Provider) createSandbox(ctx context.Context, s compute.Spec, in jobInput, npUID, secUID types.UID, sess *remote.Session) (compute.Handle, error) {
	sb := p.sandboxOf(in)
	if err := p.checkSandbox(sb, s); err != nil {
		return nil, errors.Join(err, p.deleteParts(in.name, npUID, secUID))
	}
	// The handle's pod watch starts here, before the Sandbox: it sees the Sandbox's first pod
	// whatever happens to it before the handle runs (a pod deleted at once and replaced by
	// the controller must not pass for the first).
	before, err := p.client.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + in.name})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("list pods: %w", err), p.deleteParts(in.name, npUID, secUID))
	}
	made, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Create(ctx, sb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return p.yield(ctx, s, in.name, sess, fmt.Errorf("sandbox %q exists and vanished again", in.name))
	}
	if apierrors.IsNotFound(err) {
		err = fmt.Errorf("%w (is agent-sandbox installed? its CRD %s is needed; `agora doctor` checks)", err, SandboxCRD)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create sandbox %q: %w", in.name, err), p.deleteParts(in.name, npUID, secUID))
	}
	o := owner{agentsGroupVersion.String(), "Sandbox", made.Name, made.UID}
	if err := p.ownParts(ctx, o, npUID, secUID); err != nil {
		return nil, errors.Join(fmt.Errorf("make sandbox %q own its secret and network policy: %w", in.name, err),
			p.deleteSandbox(in.name, made.UID), p.deleteParts(in.name, npUID, secUID))
	}
	return p.followFrom(ctx, s, in.name, made.UID, true, before.ResourceVersion, sess, secUID, time.Now()), nil
}

// adoptSandbox is adopt's look for the dispatch's Sandbox; other: a Sandbox is not the
// target's backend's kind (the cluster may not serve them, the Role may not grant them).
func (p *Provider) adoptSandbox(ctx context.Context, s compute.Spec, name string, other bool) (compute.Handle, error) {
	sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start %q: look for sandbox %q: %w", s.ID, name, err)
	}
	if !ownedBy(sb.Labels, s.ID) {
		return nil, fmt.Errorf("start %q: sandbox %q exists and is not agora's for this dispatch; refusing to touch it", s.ID, name)
	}
	if err := p.checkSandbox(sb, s); err != nil {
		return nil, fmt.Errorf("start %q: refusing to adopt: %w", s.ID, err)
	}
	var sess *remote.Session
	if r, ok := p.opts.Exporter.(Reattacher); ok && !p.hasSession(name) {
		if sess, err = r.Reattach(ctx, s); err != nil {
			return nil, fmt.Errorf("start %q: re-attach to the gateway session: %w", s.ID, err)
		}
	}
	return p.follow(ctx, s, name, sb.UID, true, sess, "", sb.CreationTimestamp.Time), nil
}

// deleteSandbox deletes the Sandbox of that uid in the foreground (its pod first), when the
// caller's context is gone.
func (p *Provider) deleteSandbox(name string, uid types.UID) error {
	return p.deleteSandboxAs(name, uid, metav1.DeletePropagationForeground)
}

// deleteSandboxAs deletes the Sandbox of that uid with the given propagation. Background is
// only for a Sandbox whose pod has ended: the Sandbox goes at once and the garbage collector
// takes the pod, Secret and NetworkPolicy after it.
func (p *Provider) deleteSandboxAs(name string, uid types.UID, prop metav1.DeletionPropagation) error {
	if err := fenced(fmt.Sprintf("delete sandbox %q", name)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := p.client.AgentsV1beta1().Sandboxes(p.ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptrTo(prop),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete sandbox %q: %w", name, err)
	}
	return nil
}
