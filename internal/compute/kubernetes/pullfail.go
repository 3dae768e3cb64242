package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes/kubetext"
)

// A pod whose image cannot be pulled (a missing pull secret, a wrong password, an image the
// registry does not hold) never starts and never fails: the kubelet backs off and retries for
// ever, and without this the dispatch would wait out its whole timeout and end "timeout",
// far from the cause. So the handle watches its pod, and the first container that waits on
// a pull refusal ends the dispatch, provider-failed, with the kubelet's own words. It does
// not wait out the kubelet's back-off: a registry that refused once is taken at its word (a
// transient outage fails the dispatch, which a plan's retries may run again).

// pullRefusals are the waiting reasons of a container whose image the kubelet could not get.
var pullRefusals = map[string]bool{
	"ErrImagePull":      true, // the pull failed (401 Unauthorized, not found, TLS, ...)
	"ImagePullBackOff":  true, // and the kubelet waits before trying again
	"InvalidImageName":  true,
	"ErrImageNeverPull": true, // image_pull_policy Never and the node lacks the image
}

// pullMessageLimit caps the kubelet's message copied into the dispatch's error.
const pullMessageLimit = 512

// PullError is a dispatch's pod that could not pull an image.
type PullError struct {
	Pod, Container, Image, Reason, Message string
	Namespace                              string
	Secrets                                []string // the target's image_pull_secrets
}

func (e *PullError) Error() string {
	hint := "the target has no image_pull_secrets: a private registry needs one (a docker-registry Secret in namespace " + e.Namespace + ")"
	if len(e.Secrets) > 0 {
		hint = "check that image_pull_secrets [" + strings.Join(e.Secrets, ", ") + "] exist in namespace " + e.Namespace +
			" and hold the registry's current credentials, that the node trusts the registry's certificate, and that the registry holds the image"
	}
	return fmt.Sprintf("pod %s could not pull image %s (container %s): %s: %s; %s",
		e.Pod, e.Image, e.Container, e.Reason, e.Message, hint)
}

// pullFailure is the first of pod's containers (init containers first) that waits on a pull
// refusal, or nil.
func (p *Provider) pullFailure(pod *corev1.Pod) *PullError {
	for _, st := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		w := st.State.Waiting
		if w == nil || !pullRefusals[w.Reason] {
			continue
		}
		return &PullError{Pod: pod.Name, Container: st.Name, Image: printable(st.Image, 300), Reason: w.Reason,
			Message: printable(w.Message, pullMessageLimit), Namespace: p.ns, Secrets: p.opts.PullSecrets}
	}
	return nil
}

// printable is s made safe to show and cut at limit bytes ([kubetext.Printable]).
func printable(s string, limit int) string { return kubetext.Printable(s, limit) }

// jobPodPullFailure is pullFailure for a pod the dispatch's Job controls. The label selector
// alone is not proof: whoever may create pods in the namespace may label one with the Job's
// uid, and a pod of theirs that cannot pull must not end the dispatch.
func (h *handle) jobPodPullFailure(pod *corev1.Pod) *PullError {
	if c := metav1.GetControllerOf(pod); c == nil || c.UID != h.uid {
		return nil
	}
	// A warm slot's Job is the dispatch's only in its claimed pod (followSlot): another
	// pod's refusal is not the dispatch's.
	if h.podUID != "" && pod.UID != h.podUID {
		return nil
	}
	return h.p.pullFailure(pod)
}

// watchPull watches the Job's pods until ctx ends and calls fail with the first pull
// refusal it sees. An apiserver that does not answer is retried; the Job watch, which decides
// every other end, goes on regardless.
func (h *handle) watchPull(ctx context.Context, fail context.CancelCauseFunc) {
	pods := h.p.client.CoreV1().Pods(h.p.ns)
	sel := batchv1.ControllerUidLabel + "=" + string(h.uid)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			sleep(ctx, retryDelay)
			continue
		}
		pinned := false
		for i := range list.Items {
			if perr := h.jobPodPullFailure(&list.Items[i]); perr != nil {
				fail(perr)
				return
			}
			pinned = pinned || list.Items[i].UID == h.podUID
		}
		if h.podUID != "" && !pinned && h.podGoneAlone(ctx) {
			fail(&PodGoneError{Job: h.name, Pod: "of uid " + string(h.podUID)})
			return
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion,
			TimeoutSeconds: ptrTo(int64(watchTimeout / time.Second))})
		if err != nil {
			sleep(ctx, retryDelay)
			continue
		}
		err = h.pullEvents(ctx, w.ResultChan())
		w.Stop()
		if err != nil {
			fail(err)
			return
		}
	}
}

// pullEvents reads one pod watch until a pull refusal (a *PullError), the deletion of a
// warm slot's claimed pod (a *PodGoneError), the watch's end or ctx's.
func (h *handle) pullEvents(ctx context.Context, events <-chan watch.Event) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Error || !isPod {
				return nil
			}
			if ev.Type == watch.Deleted && h.podUID != "" && pod.UID == h.podUID && h.podGoneAlone(ctx) {
				return &PodGoneError{Job: h.name, Pod: pod.Name}
			}
			if ev.Type != watch.Deleted {
				if perr := h.jobPodPullFailure(pod); perr != nil {
					return perr
				}
			}
		}
	}
}

// watchJobOrPull is the Job watch with the pull watch beside it: a pull refusal deletes the
// Job (its pod with it) and ends the dispatch with the refusal as its error, not as a cancel.
func (h *handle) watchJobOrPull(ctx context.Context) (compute.Exit, error) {
	pctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go h.watchPull(pctx, stop)
	exit, err := h.watchJob(pctx)
	var perr *PullError
	var gone *PodGoneError
	switch cause := context.Cause(pctx); {
	case ctx.Err() == nil && errors.As(cause, &perr):
		// watchJob took the refusal for a cancel: it deleted the Job and waited for it.
		h.p.forgetCancel(h.name)
		return compute.Exit{Code: -1}, errors.Join(perr, err)
	case ctx.Err() == nil && errors.As(cause, &gone) && !exit.Cancelled:
		// The Job ended on its own first (the pod's end was its end): that end stands. (A
		// cancel's own deletion of the pod is never taken for its going: watchPull asks.)
		return exit, err
	case ctx.Err() == nil && errors.As(cause, &gone):
		// The same for a warm slot's claimed pod deleted under the dispatch: the Job (and a
		// replacement pod its controller may have made, which never ran the dispatch) is
		// deleted, and the dispatch ends lost at once, not at the Job's deadline.
		h.p.forgetCancel(h.name)
		if h.stderr != nil {
			fmt.Fprintf(h.stderr, "agora: %v\n", gone)
		}
		return compute.Exit{Code: -1, Lost: true}, err
	}
	return exit, err
}

// podGoneAlone reports whether the claimed pod went while its Job stands: a cancel (this
// process's, or another supervisor's, which marks the Job cancelled) deletes the Job and the
// pod with it, and the Job's watch says how that ended.
func (h *handle) podGoneAlone(ctx context.Context) bool {
	if h.p.isCancel(h.name) {
		return false
	}
	job, err := h.p.client.BatchV1().Jobs(h.p.ns).Get(ctx, h.name, metav1.GetOptions{})
	return err == nil && job.UID == h.uid && job.DeletionTimestamp == nil && job.Annotations[annotationCancelled] != "true"
}

// PodGoneError is a warm slot's claimed pod deleted while it ran the dispatch.
type PodGoneError struct{ Job, Pod string }

func (e *PodGoneError) Error() string {
	return fmt.Sprintf("the pod %s of job %s that ran the dispatch was deleted; the job was deleted with any replacement pod, and the dispatch is lost", e.Pod, e.Job)
}
