package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describeLogLimit caps the log tail of [Description].
const describeLogLimit = 16 << 10

// Description is what `agora dispatch describe` shows of a dispatch's Job. The log tail is
// the pod's raw output: callers MUST redact it before showing it.
type Description struct {
	Job        string   // the Job's name; empty when it is gone
	Conditions []string // the Job's true conditions with their reasons, "Failed: DeadlineExceeded"
	Pod        string   // the newest pod's name; empty when there is none
	Phase      string   // Pending, Running, Succeeded, Failed, Unknown
	Node       string
	Reason     string // why the pod is where it is, when the cluster says
	LogTail    string // the worker container's last lines (init container's when it failed)
}

// Describe reports the Job named by taskID and its pod. A Job that is gone is an empty
// description, not an error.
func (p *Provider) Describe(ctx context.Context, taskID string) (Description, error) {
	ns, name, err := parseTaskID(taskID)
	if err != nil {
		return Description{}, err
	}
	if ns != p.ns {
		return Description{}, fmt.Errorf("describe %q: namespace %q is not this target's (%q)", taskID, ns, p.ns)
	}
	job, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Description{}, nil
	}
	if err != nil {
		return Description{}, fmt.Errorf("describe %q: %w", taskID, err)
	}
	if job.Labels[labelManagedBy] != managedBy {
		return Description{}, fmt.Errorf("describe %q: job %q does not carry agora's labels", taskID, name)
	}
	d := Description{Job: job.Name}
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
	if pod == nil {
		return d, nil
	}
	d.Pod, d.Phase, d.Node, d.Reason = pod.Name, string(pod.Status.Phase), pod.Spec.NodeName, pod.Status.Reason
	container := workerContainer
	for _, st := range pod.Status.InitContainerStatuses {
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			container = fetchContainer
		} else if st.State.Waiting != nil && d.Reason == "" {
			d.Reason = st.State.Waiting.Reason
		}
	}
	rc, err := p.client.CoreV1().Pods(p.ns).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, TailLines: ptrTo(int64(100)), LimitBytes: ptrTo(int64(describeLogLimit))}).Stream(ctx)
	if err != nil {
		// A pod that never started has no log: the phase and reason say why.
		return d, nil
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, describeLogLimit))
	d.LogTail = string(b)
	return d, nil
}
