package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Cancel deletes the Job named by taskID with foreground propagation, so it is gone only once
// its pod is. It first marks the Job cancelled, so the Wait following it, in whichever
// process, reports Cancelled rather than Lost. A Job already gone is not an error; a Job
// without agora's labels, or in another namespace, is refused.
func (p *Provider) Cancel(ctx context.Context, taskID string) error {
	// Not even the cancelled mark under a closed leader fence: the new leader may have
	// adopted the task, and the mark would make its end a cancel.
	if err := fenced("cancel " + taskID); err != nil {
		return err
	}
	ns, name, err := parseTaskID(taskID)
	if err != nil {
		return err
	}
	if ns != p.ns {
		return fmt.Errorf("cancel %q: namespace %q is not this target's (%q)", taskID, ns, p.ns)
	}
	// Both kinds, the backend's first: a dispatch started before the target's backend was
	// switched runs as the other (see adopt).
	first, second := p.cancelJob, p.cancelSandbox
	if p.agentSandbox() {
		first, second = p.cancelSandbox, p.cancelJob
	}
	if found, err := first(ctx, taskID, name, false); found || err != nil {
		return err
	}
	_, err = second(ctx, taskID, name, true)
	return err
}

// cancelJob is Cancel of the dispatch's Job; found is false when there is none (other: a Job
// is not the target's backend's kind, and a refusal to read it counts as none).
func (p *Provider) cancelJob(ctx context.Context, taskID, name string, other bool) (found bool, err error) {
	jobs := p.client.BatchV1().Jobs(p.ns)
	job, err := jobs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("cancel %q: %w", taskID, err)
	}
	if job.Labels[labelManagedBy] != managedBy || job.Labels[labelDispatch] == "" {
		return true, fmt.Errorf("cancel %q: job %q does not carry agora's labels; refusing to delete it", taskID, name)
	}
	p.markCancel(name)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, annotationCancelled)
	if _, err := jobs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return true, fmt.Errorf("cancel %q: mark cancelled: %w", taskID, err)
	}
	// The NetworkPolicy is the Job's dependent, and a foreground deletion removes dependents
	// at once, the pod's while it still runs: the agent would have the kubelet's kill time
	// without its policy. So the policy is orphaned first, and removed only
	// after the Job, pods included, is gone; when this process does not see that, Sweep does.
	policy, err := p.orphanPolicy(ctx, name)
	if err != nil {
		return true, fmt.Errorf("cancel %q: keep the network policy until the pod is gone: %w", taskID, err)
	}
	err = jobs.Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptrTo(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return true, fmt.Errorf("cancel %q: delete job: %w", taskID, err)
	}
	if policy != "" && p.jobGone(ctx, name, job.UID) {
		p.deletePolicy(name, policy)
	}
	return true, nil
}

// orphanPolicy removes the Job's owner reference from the dispatch's NetworkPolicy and returns
// the policy's uid ("" when there is none). It finds the policy by listing: agora's Role may
// list policies, not get them (a get here is refused, and the pod would be left running).
// The patch carries the uid it read, so it orphans that policy only.
func (p *Provider) orphanPolicy(ctx context.Context, name string) (types.UID, error) {
	nps := p.client.NetworkingV1().NetworkPolicies(p.ns)
	np, err := p.findPolicy(ctx, name)
	if err != nil || np == nil {
		return "", err
	}
	if len(np.OwnerReferences) > 0 {
		patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"ownerReferences":null}}`, np.UID)
		if _, err := nps.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return "", nil // gone, or replaced since the list: not this Job's to hold
			}
			return "", err
		}
	}
	return np.UID, nil
}

// jobGone waits, up to policyHoldWait, for the Job of that uid to be deleted (foreground: its
// pods first).
func (p *Provider) jobGone(ctx context.Context, name string, uid types.UID) bool {
	ctx, cancel := context.WithTimeout(ctx, policyHoldWait)
	defer cancel()
	for {
		j, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && j.UID != uid) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deletePolicy deletes the NetworkPolicy of that uid (never a newer Start's).
func (p *Provider) deletePolicy(name string, uid types.UID) {
	if fenced("delete network policy") != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = p.client.NetworkingV1().NetworkPolicies(p.ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
}

// policyHoldWait bounds how long Cancel waits to remove an orphaned policy itself.
const policyHoldWait = 30 * time.Second

// deleteJob deletes the Job of that uid in the foreground, when the caller's context is gone.
// Under a closed leader fence (a supervisor whose serve lost its lease) it deletes
// nothing: the new leader may have adopted the Job.
func (p *Provider) deleteJob(name string, uid types.UID) error {
	if err := fenced(fmt.Sprintf("delete job %q", name)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := p.client.BatchV1().Jobs(p.ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptrTo(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete job %q: %w", name, err)
	}
	return nil
}

func (p *Provider) markCancel(name string) {
	p.mu.Lock()
	p.cancelled[name] = true
	p.mu.Unlock()
}

func (p *Provider) isCancel(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cancelled[name]
}

func (p *Provider) forgetCancel(name string) {
	p.mu.Lock()
	delete(p.cancelled, name)
	p.mu.Unlock()
}

// RevokeSession ends the dispatch's gateway session, when the exporter can (a
// [remote.Revoker]): the reaper calls it for a dispatch whose supervisor died, whose pod may
// still run with the token.
func (p *Provider) RevokeSession(ctx context.Context, dispatchID string) error {
	if r, ok := p.opts.Exporter.(remote.Revoker); ok {
		return r.Revoke(ctx, dispatchID)
	}
	return nil
}

// Sweep deletes what agora left in the namespace for dispatches that terminal reports ended:
// their Jobs (foreground; the Secret and NetworkPolicy go with them as their dependents), and
// the NetworkPolicy and Secret of a start that crashed before its Job existed (every such
// Secret has a NetworkPolicy of its name, made first, so Secrets are never listed). It
// returns how many dispatches it cleaned.
func (p *Provider) Sweep(ctx context.Context, terminal func(id string) bool) (int, error) {
	sel := metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy + "," + labelDispatch}
	var errs []error
	cleaned := map[string]bool{}
	// Both kinds, the backend's first: dispatches of a target whose backend was switched
	// left the other kind (see adopt).
	if err := p.sweepSandboxes(ctx, sel, terminal, cleaned, !p.agentSandbox()); err != nil {
		return 0, err
	}
	jobs, err := p.client.BatchV1().Jobs(p.ns).List(ctx, sel)
	switch {
	case p.agentSandbox() && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)):
		jobs = &batchv1.JobList{}
	case err != nil:
		return len(cleaned), fmt.Errorf("sweep: list jobs: %w", err)
	}
	for _, j := range jobs.Items {
		id := j.Labels[labelDispatch]
		if j.Name != objectName(id) || !terminal(id) {
			continue
		}
		cleaned[id] = true
		if err := p.deleteJob(j.Name, j.UID); err != nil {
			errs = append(errs, err)
		}
	}
	nps, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, sel)
	if err != nil {
		return len(cleaned), errors.Join(append(errs, fmt.Errorf("sweep: list network policies: %w", err))...)
	}
	for _, np := range nps.Items {
		id := np.Labels[labelDispatch]
		if np.Name != objectName(id) || !terminal(id) {
			continue
		}
		cleaned[id] = true
		if err := p.sweepParts(np.Name, np.UID); err != nil {
			errs = append(errs, err)
		}
	}
	return len(cleaned), errors.Join(errs...)
}

// sweepParts deletes a terminal dispatch's NetworkPolicy (of the uid listed) and its Secret.
// The Secret goes by name: the provider may not read Secrets to learn its uid, and no Start of
// a dispatch that ended can be running to own one of that name (a Secret made by this agora is
// owned by its policy anyway, and goes with it).
func (p *Provider) sweepParts(name string, npUID types.UID) error {
	if err := fenced(fmt.Sprintf("sweep the network policy and secret %q", name)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	if err := p.client.CoreV1().Secrets(p.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete secret %q: %w", name, err))
	}
	if err := p.deleteParts(name, npUID, ""); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
