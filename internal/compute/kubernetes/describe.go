package kubernetes

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

var _ compute.Describer = (*Provider)(nil)

// Describe reports the Job named by taskID and its newest pod: phase, node and why it is
// where it is. A Job that is gone is Placement.Gone, not an error. It reads no log: the
// worker's output reaches the dispatch's record through the gateway, redacted.
func (p *Provider) Describe(ctx context.Context, taskID string) (compute.Placement, error) {
	d := compute.Placement{Provider: "kubernetes"}
	ns, name, err := parseTaskID(taskID)
	if err != nil {
		return d, err
	}
	if ns != p.ns {
		return d, fmt.Errorf("describe %q: namespace %q is not this target's (%q)", taskID, ns, p.ns)
	}
	d.Object = name
	// Both kinds, the backend's first (see adopt).
	first, second := p.describeJob, p.describeSandbox
	if p.agentSandbox() {
		first, second = p.describeSandbox, p.describeJob
	}
	if got, err := first(ctx, taskID, d, false); err != nil || !got.Gone {
		return got, err
	}
	return second(ctx, taskID, d, true)
}

// describeJob is Describe of the dispatch's Job (other: a Job is not the backend's kind, and
// a refusal to read it counts as gone).
func (p *Provider) describeJob(ctx context.Context, taskID string, d compute.Placement, other bool) (compute.Placement, error) {
	name := d.Object
	job, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		d.Gone = true
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("describe %q: %w", taskID, err)
	}
	if job.Labels[labelManagedBy] != managedBy {
		return d, fmt.Errorf("describe %q: job %q does not carry agora's labels", taskID, name)
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			d.Conditions = append(d.Conditions, strings.TrimSuffix(string(c.Type)+": "+c.Reason, ": "))
		}
	}
	pods, err := p.client.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		return d, fmt.Errorf("describe %q: list pods: %w", taskID, err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pod == nil || pods.Items[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = &pods.Items[i]
		}
	}
	describePod(&d, pod)
	return d, nil
}

// describePod fills d from the dispatch's pod, if there is one.
func describePod(d *compute.Placement, pod *corev1.Pod) {
	if pod == nil {
		return
	}
	d.Pod, d.Phase, d.Node, d.Reason = pod.Name, string(pod.Status.Phase), pod.Spec.NodeName, pod.Status.Reason
	for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if d.Reason != "" {
			break
		}
		switch {
		case st.State.Waiting != nil:
			d.Reason = st.State.Waiting.Reason
		case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
			d.Reason = fmt.Sprintf("%s %s exited %d", st.Name, st.State.Terminated.Reason, st.State.Terminated.ExitCode)
		}
	}
}
