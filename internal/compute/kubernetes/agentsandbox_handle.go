package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/agora-dev/agora/internal/compute"
)

// sandboxRecheck is how long one pod watch of a Sandbox's handle lasts before the Sandbox
// itself is read again (a Sandbox deleted behind agora's back is noticed within it).
const sandboxRecheck = 10 * time.Second

// sandboxGoingRecheck is sandboxRecheck while the Sandbox is being deleted (a cancel): its end
// comes as no pod event, and a cancelled Wait would wait up to sandboxRecheck to see it.
const sandboxGoingRecheck = time.Second

// watchSandbox follows a Sandbox's pod until it has ended, or the Sandbox is gone. A Sandbox
// is not a Job: its controller makes a new pod when the pod is deleted, and nothing times the
// pod out but its own activeDeadlineSeconds. So the handle pins the Sandbox's first pod (by
// uid; its watch starts before the Sandbox was made, h.podRV, and resumes where it left off,
// so it sees every pod in order): the pod gone unfinished, or a second pod, ends the dispatch
// as lost and the Sandbox is deleted, so a dispatch's worker never runs twice. When the
// dispatch ended its Sandbox is deleted (its Secret and NetworkPolicy go with it); a Sandbox
// has no TTL. An adopted Sandbox (a restarted supervisor) pins the first pod it sees.
func (h *handle) watchSandbox(ctx context.Context) (compute.Exit, error) {
	sbs := h.p.client.AgentsV1beta1().Sandboxes(h.p.ns)
	pods := h.p.client.CoreV1().Pods(h.p.ns)
	wctx := ctx
	cancelling := false
	f := &podFollow{h: h, rv: h.podRV, uid: h.podUID}
	for {
		if !cancelling && ctx.Err() == nil && !h.deadline.IsZero() && !time.Now().Before(h.deadline) {
			// A pool's pod: nothing else times it out.
			return h.endSandbox(compute.Exit{Code: -1, Signal: "killed", TimedOut: true}, nil)
		}
		if !cancelling && ctx.Err() != nil {
			cancelling = true
			h.p.markCancel(h.name)
			if err := h.deleteOwn(metav1.DeletePropagationForeground); err != nil {
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
		// A Sandbox being deleted (Cancel, in whichever process) loses its pod first: wait
		// for it to go, and read its mark now.
		if sb.DeletionTimestamp != nil && sb.Annotations[annotationCancelled] == "true" {
			h.p.markCancel(h.name)
		}
		f.deleting = cancelling || sb.DeletionTimestamp != nil
		// A Service turned on behind agora's back (whoever may patch Sandboxes) gives the pod a
		// name that reaches it wherever the NetworkPolicy is not enforced: the dispatch ends at
		// this read, at most sandboxRecheck after the edit.
		if !f.deleting && (sb.Spec.Service == nil || *sb.Spec.Service) {
			exit, err := h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
			return exit, errors.Join(err, fmt.Errorf("sandbox %q: its spec.service was turned on; stopped", h.name))
		}
		if f.rv == "" {
			// The controller names the pod after its Sandbox.
			l, err := pods.List(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + h.name})
			if err != nil {
				sleep(wctx, retryDelay)
				continue
			}
			seen := false
			for i := range l.Items {
				seen = seen || f.owned(&l.Items[i])
				if exit, done, err := f.see(wctx, &l.Items[i], false); done {
					return exit, err
				}
			}
			if !seen && f.uid != "" && !f.deleting {
				return h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
			}
			f.rv = l.ResourceVersion
		}
		recheck := sandboxRecheck
		if f.deleting {
			recheck = sandboxGoingRecheck
		}
		if !h.deadline.IsZero() && !f.deleting {
			recheck = max(time.Second, min(recheck, time.Until(h.deadline)+time.Second))
		}
		w, err := pods.Watch(wctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + h.name,
			ResourceVersion: f.rv,
			TimeoutSeconds:  ptrTo(int64(recheck / time.Second)),
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				f.rv = ""
			}
			sleep(wctx, retryDelay)
			continue
		}
		exit, done, err := f.events(wctx, w)
		w.Stop()
		if done {
			return exit, err
		}
	}
}

// podFollow is watchSandbox's view of the Sandbox's pods: the pinned pod and where its
// watch is.
type podFollow struct {
	h        *handle
	uid      types.UID         // the pinned pod, "" before the first
	rv       string            // the last resource version read; "" to list again
	deleting bool              // the Sandbox is going (a cancel): its pod's end is expected
	labels   map[string]string // the pinned pod's labels but the controller's, at first sight
}

// sandboxSystemPrefix starts the labels agent-sandbox's controller sets on a pod itself (its
// name hash, pool and created-by labels); it never takes them from a template.
const sandboxSystemPrefix = "agents.x-k8s.io/"

// podOwnLabels is a pod's labels without the controller's own.
func podOwnLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		if !strings.HasPrefix(k, sandboxSystemPrefix) {
			out[k] = v
		}
	}
	return out
}

func (f *podFollow) owned(pod *corev1.Pod) bool {
	c := metav1.GetControllerOf(pod)
	return c != nil && c.UID == f.h.uid
}

// see judges one state of a pod of the Sandbox's name; deleted: it is gone.
func (f *podFollow) see(ctx context.Context, pod *corev1.Pod, deleted bool) (compute.Exit, bool, error) {
	if !f.owned(pod) {
		return compute.Exit{}, false, nil
	}
	f.uid = cmp.Or(f.uid, pod.UID)
	if pod.UID != f.uid {
		exit, err := f.h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
		return exit, true, errors.Join(err, fmt.Errorf("sandbox %q: its pod was replaced; a dispatch's worker runs once", f.h.name))
	}
	// The controller carries the Sandbox's template labels over to the running pod: an edit
	// of the template by whoever may patch Sandboxes takes the pod out of its NetworkPolicy's
	// selector, or into another policy's (policies add up), and such a pod must not run on.
	// Its labels but the controller's own are pinned at first sight.
	own := podOwnLabels(pod.Labels)
	if f.labels == nil {
		f.labels = own
	}
	if !deleted && (!f.h.podLabelled(pod.Labels) || !maps.Equal(own, f.labels)) {
		exit, err := f.h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
		return exit, true, errors.Join(err, fmt.Errorf("sandbox %q: its pod's labels changed (the Sandbox's template was relabelled): its NetworkPolicy may no longer be the only one selecting it; stopped", f.h.name))
	}
	if !deleted && !f.deleting && pod.DeletionTimestamp != nil {
		// The pod is going. If its Sandbox is being deleted (a foreground deletion waits for
		// this pod, so the Sandbox still stands now), read its cancel mark here: once the pod
		// is gone the Sandbox may be gone too before this handle reads it, and a handle that
		// never saw the mark (a cancel from another process: a second supervisor, a CLI) took
		// the cancel for a loss (TestAgentSandboxBackend_SwitchedBackendAdoptsNotReplaces,
		// _DocumentedRole: 1 in ~12 runs at load).
		sb, err := f.h.p.client.AgentsV1beta1().Sandboxes(f.h.p.ns).Get(ctx, f.h.name, metav1.GetOptions{})
		if err == nil && sb.UID == f.h.uid && sb.DeletionTimestamp != nil {
			if sb.Annotations[annotationCancelled] == "true" {
				f.h.p.markCancel(f.h.name)
			}
			f.deleting = true
		}
	}
	if exit, done := f.h.sandboxPodEnded(ctx, pod); done {
		exit, err := f.h.endSandbox(exit, nil, metav1.DeletePropagationBackground)
		return exit, true, err
	}
	if perr := f.h.p.pullFailure(pod); perr != nil && !deleted && !f.deleting {
		// A pod that cannot pull its image never starts (see pullfail.go).
		exit, err := f.h.endSandbox(compute.Exit{Code: -1}, nil)
		return exit, true, errors.Join(perr, err)
	}
	if deleted && !f.deleting {
		// Gone unfinished: a cancel's, if the Sandbox is going (read again, it may have
		// started since), else lost.
		sb, err := f.h.p.client.AgentsV1beta1().Sandboxes(f.h.p.ns).Get(ctx, f.h.name, metav1.GetOptions{})
		if err == nil && sb.UID == f.h.uid && sb.DeletionTimestamp == nil {
			exit, err := f.h.endSandbox(compute.Exit{Code: -1, Lost: true}, nil)
			return exit, true, err
		}
		f.rv = "" // the loop reads the Sandbox and its mark
	} else if deleted {
		// Gone as its Sandbox is deleted: the loop reads the Sandbox now, not when this
		// watch, started before the deletion with the longer recheck, times out.
		f.rv = ""
	}
	return compute.Exit{}, false, nil
}

// events reads one pod watch until the dispatch is decided, the watch ends or ctx ends.
func (f *podFollow) events(ctx context.Context, w watch.Interface) (compute.Exit, bool, error) {
	for {
		select {
		case <-ctx.Done():
			return compute.Exit{}, false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return compute.Exit{}, false, nil
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Error || !isPod {
				f.rv = "" // expired, or not understood: list again
				return compute.Exit{}, false, nil
			}
			f.rv = pod.ResourceVersion
			if exit, done, err := f.see(ctx, pod, ev.Type == watch.Deleted); done || f.rv == "" {
				return exit, done, err
			}
		}
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
	if derr := h.deleteOwn(pr); derr != nil && err == nil {
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

// podLabelled reports whether a pod's labels are those its NetworkPolicy selects: the
// dispatch's, or a pool pod's its pool's.
func (h *handle) podLabelled(l map[string]string) bool {
	if h.pool != "" {
		return l[labelManagedBy] == managedBy && l[labelPool] == h.pool
	}
	return ownedBy(l, h.id)
}

// deleteOwn deletes what the dispatch holds: its Sandbox, or a pool pod's claim (whose
// Sandbox and pod the garbage collector takes with it).
func (h *handle) deleteOwn(prop metav1.DeletionPropagation) error {
	if h.claim != "" {
		return h.p.deleteClaimAs(h.claim, h.claimUID, prop)
	}
	return h.p.deleteSandboxAs(h.name, h.uid, prop)
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
