package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// cancelSandbox is Cancel for the agent-sandbox backend, in the Job's order: mark it
// cancelled, orphan the NetworkPolicy (a foreground deletion removes dependents at once, the
// pod's policy while it runs), delete the Sandbox in the foreground, and remove the policy once
// the Sandbox, pod included, is gone.
func (p *Provider) cancelSandbox(ctx context.Context, taskID, name string, other bool) (found bool, err error) {
	sbs := p.client.AgentsV1beta1().Sandboxes(p.ns)
	sb, err := sbs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("cancel %q: %w", taskID, err)
	}
	if sb.Labels[labelManagedBy] != managedBy || sb.Labels[labelDispatch] == "" {
		return true, fmt.Errorf("cancel %q: sandbox %q does not carry agora's labels; refusing to delete it", taskID, name)
	}
	return true, p.cancelOwnSandbox(ctx, taskID, name, sb)
}

// cancelOwnSandbox cancels sb, agora's.
func (p *Provider) cancelOwnSandbox(ctx context.Context, taskID, name string, sb *sandboxObject) error {
	sbs := p.client.AgentsV1beta1().Sandboxes(p.ns)
	p.markCancel(name)
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:"true"}}}`, sb.UID, annotationCancelled)
	if _, err := sbs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("cancel %q: mark cancelled: %w", taskID, err)
	}
	if ref, ok := controllerRef(sb.OwnerReferences); ok && ref.Kind == "SandboxClaim" && ref.Name == objectName(sb.Labels[labelDispatch]) {
		// A pool's pod (pool.go): its claim goes, and the Sandbox and pod with it (deleting
		// the Sandbox alone, the controller would make the claim another). The pool's policy
		// is not the dispatch's: it stays.
		if err := p.deleteClaim(ref.Name, ref.UID); err != nil {
			return fmt.Errorf("cancel %q: %w", taskID, err)
		}
		return nil
	}
	policy, err := p.orphanPolicy(ctx, name)
	if err != nil {
		return fmt.Errorf("cancel %q: keep the network policy until the pod is gone: %w", taskID, err)
	}
	if err := p.deleteSandbox(name, sb.UID); err != nil {
		return fmt.Errorf("cancel %q: %w", taskID, err)
	}
	if policy != "" && p.sandboxGone(ctx, name, sb.UID) {
		p.deletePolicy(name, policy)
	}
	return nil
}

// sandboxGone waits, up to policyHoldWait, for the Sandbox of that uid to be deleted.
func (p *Provider) sandboxGone(ctx context.Context, name string, uid types.UID) bool {
	ctx, cancel := context.WithTimeout(ctx, policyHoldWait)
	defer cancel()
	for {
		sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && sb.UID != uid) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sweepSandboxes deletes the Sandboxes of ended dispatches (their pod, Secret and
// NetworkPolicy go with them), adding their ids to cleaned.
func (p *Provider) sweepSandboxes(ctx context.Context, sel metav1.ListOptions, terminal func(string) bool, cleaned map[string]bool, other bool) error {
	l, err := p.client.AgentsV1beta1().Sandboxes(p.ns).List(ctx, sel)
	if other && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep: list sandboxes: %w", err)
	}
	for _, sb := range l.Items {
		id := sb.Labels[labelDispatch]
		if sb.Name != objectName(id) || !terminal(id) {
			continue
		}
		cleaned[id] = true
		if err := p.deleteSandbox(sb.Name, sb.UID); err != nil {
			return err
		}
	}
	return nil
}

// describeSandbox is Describe for the agent-sandbox backend: the Sandbox's true conditions and
// its pod.
func (p *Provider) describeSandbox(ctx context.Context, taskID string, d compute.Placement, other bool) (compute.Placement, error) {
	sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(ctx, d.Object, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		d.Gone = true
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("describe %q: %w", taskID, err)
	}
	if sb.Labels[labelManagedBy] != managedBy {
		return d, fmt.Errorf("describe %q: sandbox %q does not carry agora's labels", taskID, d.Object)
	}
	for _, c := range sb.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			d.Conditions = append(d.Conditions, strings.TrimSuffix("Sandbox "+c.Type+": "+c.Reason, ": "))
		}
	}
	pod, err := p.client.CoreV1().Pods(p.ns).Get(ctx, d.Object, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return d, nil
	case err != nil:
		return d, fmt.Errorf("describe %q: get pod: %w", taskID, err)
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.UID == sb.UID {
		describePod(&d, pod)
	}
	return d, nil
}
