package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// sandboxRecheck is how long one pod watch of a Sandbox's handle lasts before the Sandbox
// itself is read again (a Sandbox deleted behind agora's back is noticed within it).
const sandboxRecheck = 10 * time.Second

// watchSandbox follows a Sandbox's pod until it has ended, or the Sandbox is gone. A Sandbox
// is not a Job: its controller makes a new pod when the pod is deleted, and nothing times the
// pod out but its own activeDeadlineSeconds. So the handle pins the first pod it sees (by
// uid): a pod that vanished unfinished, or a second pod, ends the dispatch as lost and the
// Sandbox is deleted, so a dispatch's worker never runs twice. When the dispatch ended its
// Sandbox is deleted (its Secret and NetworkPolicy go with it); a Sandbox has no TTL.
func (h *handle) watchSandbox(ctx context.Context) (compute.Exit, error) {
	sbs := h.p.client.AgentsV1beta1().Sandboxes(h.p.ns)
	pods := h.p.client.CoreV1().Pods(h.p.ns)
	wctx := ctx
	cancelling := false
	var podUID types.UID
	for {
		if !cancelling && ctx.Err() != nil {
			cancelling = true
			h.p.markCancel(h.name)
			if err := h.p.deleteSandbox(h.name, h.uid); err != nil {
				return compute.Exit{Code: -1, Cancelled: true}, err
			}
			var stop context.CancelFunc
			wctx, stop = context.WithTimeout(context.Background(), cancelWait)
			defer stop()
		}
		sb, err := sbs.Get(wctx, h.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && sb.UID != h.uid):
			return h.vanishedSandbox(), nil
		case err != nil:
			if cancelling && wctx.Err() != nil {
				return compute.Exit{Code: -1, Cancelled: true}, fmt.Errorf("sandbox %q: deleted, still there after %v", h.name, cancelWait)
			}
			sleep(wctx, retryDelay)
			continue
		}
		// The controller names the pod after its Sandbox; it must be the Sandbox's own.
		l, err := pods.List(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + h.name})
		if err != nil {
			sleep(wctx, retryDelay)
			continue
		}
		for i := range l.Items {
			pod := &l.Items[i]
			if c := metav1.GetControllerOf(pod); c == nil || c.UID != h.uid {
				continue
			}
			if podUID == "" {
				podUID = pod.UID
			}
			if pod.UID != podUID {
				return h.endSandbox(compute.Exit{Code: -1, Lost: true}, fmt.Errorf("sandbox %q: its pod was replaced; a dispatch's worker runs once", h.name))
			}
			if exit, done := h.sandboxPodEnded(wctx, pod); done {
				return h.endSandbox(exit, nil, metav1.DeletePropagationBackground)
			}
		}
		// A Sandbox being deleted (Cancel, in whichever process) loses its pod first: wait
		// for it to go, and read its mark then.
		if sb.DeletionTimestamp != nil && sb.Annotations[annotationCancelled] == "true" {
			h.p.markCancel(h.name)
		}
		if len(l.Items) == 0 && podUID != "" && !cancelling && sb.DeletionTimestamp == nil {
			return h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
		}
		w, err := pods.Watch(wctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + h.name,
			ResourceVersion: l.ResourceVersion,
			TimeoutSeconds:  ptrTo(int64(sandboxRecheck / time.Second)),
		})
		if err != nil {
			sleep(wctx, retryDelay)
			continue
		}
		// Any change, or the watch's end, is read again from the top.
		select {
		case <-wctx.Done():
		case <-w.ResultChan():
		case <-ctx.Done():
		}
		w.Stop()
	}
}

// sandboxPodEnded reports how the Sandbox's pod ended, if it has.
func (h *handle) sandboxPodEnded(ctx context.Context, pod *corev1.Pod) (compute.Exit, bool) {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return compute.Exit{}, false
	}
	if pod.Status.Reason == "DeadlineExceeded" {
		return compute.Exit{Code: -1, Signal: "killed", TimedOut: true}, true
	}
	if exit, ok := h.exitOfPod(ctx, pod); ok {
		return exit, true
	}
	return compute.Exit{Code: -1, Lost: true}, true
}

// endSandbox deletes the ended dispatch's Sandbox (and so its pod, Secret and NetworkPolicy):
// in the foreground unless its pod has ended.
func (h *handle) endSandbox(exit compute.Exit, err error, prop ...metav1.DeletionPropagation) (compute.Exit, error) {
	pr := metav1.DeletePropagationForeground
	if len(prop) > 0 {
		pr = prop[0]
	}
	if derr := h.p.deleteSandboxAs(h.name, h.uid, pr); derr != nil && err == nil {
		err = derr
	}
	if pr == metav1.DeletePropagationBackground {
		// The pod has ended: its policy goes now rather than whenever the garbage collector
		// gets to it (a cluster's collector learns a new CRD's owners only at its next resync).
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if np, ferr := h.p.findPolicy(ctx, h.name); ferr == nil && np != nil && ownedByUID(np.OwnerReferences, h.uid) {
			h.p.deletePolicy(h.name, np.UID)
		}
	}
	return exit, err
}

// vanishedSandbox is the exit of a Sandbox that is gone: Cancelled when agora deleted it.
func (h *handle) vanishedSandbox() compute.Exit {
	if h.p.isCancel(h.name) {
		return compute.Exit{Code: -1, Signal: "killed", Cancelled: true}
	}
	return compute.Exit{Code: -1, Lost: true}
}

func ownedByUID(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}
