package kubernetes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// A waiting slot's pod is watched from the moment it runs until the slot is claimed or
// discarded. Were only a claim's [Slot.Check] to ask the cluster, a slot whose pod was
// deleted, ended, relabelled out of its policy, given an ephemeral container or resized while
// it waited would be counted ready (doctor, metrics, the web view) and keep its holder (a
// serve's standby supervisor) waiting until a dispatch found it gone and started cold. So
// [Slot.Alive] turns false as soon as the watch sees any of that, the standby ends and its
// serve starts another. The claim still runs the whole check: the watch makes the counts
// true, it decides no claim.

// slotRewatch bounds one watch request: the apiserver ends a watch at its own timeout, and
// the loop lists again.
const slotRewatch = 5 * time.Minute

// slotCallWait bounds each list, and the watch past slotRewatch, on this side: an apiserver
// that stops answering (hung, or a proxy in front of it stuck) ends nothing by itself, and
// over HTTP/1.1 (no HTTP/2 health check: a proxy without it, DISABLE_HTTP2) the silent watch
// would wait for ever while its slot, its pod gone, counted ready.
const slotCallWait = 30 * time.Second

// watchBounds are the list's and the watch's client-side bounds.
func (p *Provider) watchBounds() (list, watch time.Duration) {
	if d := p.testOnlyWatchWait; d > 0 {
		return d, d
	}
	return slotCallWait, slotRewatch + slotCallWait
}

// closeIdle drops the provider's pooled connections to the apiserver. A call that ran out of
// time means the apiserver (or a proxy before it) went silent, and every connection pooled
// while it was may be one it will never answer: over HTTP/1.1 each was otherwise tried in
// turn, a bound's wait apiece, before a new one (a busy pool: 40 s and more after the
// apiserver answers again, the deleted slot still counted ready).
func (p *Provider) closeIdle() {
	if c, ok := p.client.(interface{ closeIdle() }); ok {
		c.closeIdle()
	}
}

// Gone returns a channel closed once the slot's pod is no longer the running pod the slot was
// started with (see above). It never closes for a claimed or discarded slot whose pod was fine.
func (sl *Slot) Gone() <-chan struct{} { return sl.gone }

// watchPod follows the slot's pod until ctx ends (the slot claimed or discarded) or the pod
// stops waiting, which closes sl.gone. An apiserver that does not answer is retried, each call
// bounded here (watchBounds): only the pod's own state ends the slot here.
func (sl *Slot) watchPod(ctx context.Context) {
	pods := sl.p.client.CoreV1().Pods(sl.p.ns)
	sel := labelSlot + "=" + sl.ID
	var uid types.UID
	listWait, watchWait := sl.p.watchBounds()
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, listWait)
		l, err := pods.List(lctx, metav1.ListOptions{LabelSelector: sel})
		cancel()
		if err != nil {
			sl.p.closeIdle()
			sleep(ctx, retryDelay)
			continue
		}
		if len(l.Items) != 1 {
			sl.markGone() // gone, or a second pod: the Job's one pod is not what waits
			return
		}
		if uid == "" {
			uid = l.Items[0].UID
		}
		if !sl.podWaits(&l.Items[0], uid) {
			sl.markGone()
			return
		}
		wctx, cancel := context.WithTimeout(ctx, watchWait)
		w, err := pods.Watch(wctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion,
			TimeoutSeconds: ptrTo(int64(slotRewatch / time.Second))})
		if err != nil {
			cancel()
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				sl.p.closeIdle()
				sleep(ctx, retryDelay)
			}
			continue
		}
		if f := sl.p.testOnlyWatching; f != nil {
			f()
		}
		gone := sl.podEvents(wctx, w, uid)
		w.Stop()
		if ctx.Err() == nil && wctx.Err() != nil {
			sl.p.closeIdle() // the apiserver ends a watch at its own timeout, well before ours
		}
		cancel()
		if gone {
			sl.markGone()
			return
		}
	}
}

// podEvents reads w until it ends (false: list again) or an event shows the slot's pod no
// longer waiting (true). A pod leaving the label selector (relabelled) arrives as Deleted.
func (sl *Slot) podEvents(ctx context.Context, w watch.Interface, uid types.UID) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			if !open {
				return false
			}
			pod, ok := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error || !ok:
				return false
			case ev.Type == watch.Deleted:
				return true
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if !sl.podWaits(pod, uid) {
					return true
				}
			}
		}
	}
}

// podWaits is the pod half of [Slot.Check], on what the watch saw: the slot's one pod (uid),
// its Job's, running, not being deleted, labelled as its policy selects, with no ephemeral
// container, the containers, volumes and resources it was made with, and its filler waiting.
func (sl *Slot) podWaits(pod *corev1.Pod, uid types.UID) bool {
	return pod.UID == uid && ownedByUID(pod.OwnerReferences, sl.job) && pod.DeletionTimestamp == nil &&
		pod.Status.Phase == corev1.PodRunning && slotLabelled(pod.Labels, sl.ID) &&
		len(pod.Spec.EphemeralContainers) == 0 && containersHash(pod.Spec) == sl.pod && fillerWaits(pod)
}

// markGone closes sl.gone once.
func (sl *Slot) markGone() {
	sl.goneOnce.Do(func() { close(sl.gone) })
}

// isGone reports whether the watch saw the slot's pod stop waiting.
func (sl *Slot) isGone() bool {
	select {
	case <-sl.gone:
		return true
	default:
		return false
	}
}
