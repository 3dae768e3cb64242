package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// SlotAdoption is what a supervisor host knows, from the dispatch's record, of a dispatch
// that may have run in a warm slot ([Provider.AdoptSlot]).
type SlotAdoption struct {
	// TaskID is the dispatch's recorded provider task id: for a slot's dispatch it names the
	// slot's Job (k8s:<namespace>/agora-<slot>), not one of the dispatch's own name.
	TaskID string
	// Home is this home's slot label ([SlotOptions.Home]): another home's slot is never adopted.
	Home string
	// Former are labels this same home's slots carried under an older agora (its identity
	// was computed otherwise then: dispatch.k8sHomes), adopted as Home's: a slot claimed before
	// an upgrade is not lost by it. Never another home's.
	Former []string
	// Started is when the dispatch was recorded started, just after its claim: the adopted
	// dispatch's duration counts from it, and the Job's deadline must not pass it by more
	// than the dispatch's timeout. Zero: now.
	Started time.Time
}

// deadlineSlop covers the rounding of a claimed slot's deadline (whole seconds, plus one) and a
// Job's start time (whole seconds) when [Provider.AdoptSlot] checks it.
const deadlineSlop = 5 * time.Second

// AdoptSlot is [Provider.Adopt] for a dispatch that [Slot.Run] ran in a warm slot, for a
// supervisor host whose dispatch's first supervisor died: there is no Job of the dispatch's
// name; its recorded task id names the slot's Job, which is followed to its end with the
// gateway session taken back, as Adopt follows a cold dispatch's Job. Nothing is created,
// bound, exported or deleted.
//
// The Job is adopted only if it is this home's slot Job (every slot label, on the Job and on
// its pod template, and a.Home's or one of a.Former), marked claimed by exactly s.ID, not
// being deleted, its deadline no later than the dispatch's timeout from its start, and its
// pod, while it has one, the pod the claim checked (the claimed-pod annotation, set with the
// claim: the one whose worker took the dispatch's grant), unchanged and still the slot's.
// Anything else is refused with an error: another dispatch's or another home's slot, a slot
// never claimed, a claim mark edited since, a replaced pod. nil, nil: the task id names no
// slot's Job (a cold dispatch's), or the slot's Job is gone; the caller ends the dispatch lost.
func (p *Provider) AdoptSlot(ctx context.Context, s compute.Spec, a SlotAdoption) (compute.Handle, error) {
	if err := checkDispatchID(s.ID); err != nil {
		return nil, fmt.Errorf("adopt %q from a warm slot: %w", s.ID, err)
	}
	for _, h := range append([]string{a.Home}, a.Former...) {
		if !validHome(h) {
			return nil, fmt.Errorf("adopt %q from a warm slot: home %q: want [a-z0-9], 1 to %d bytes", s.ID, h, maxName)
		}
	}
	ns, name, err := parseTaskID(a.TaskID)
	if err != nil {
		return nil, fmt.Errorf("adopt %q from a warm slot: %w", s.ID, err)
	}
	if ns != p.ns {
		return nil, fmt.Errorf("adopt %q from a warm slot: its task %s is in namespace %s, not the target's %s; refusing to adopt", s.ID, a.TaskID, ns, p.ns)
	}
	slot := strings.TrimPrefix(name, "agora-")
	if name == objectName(s.ID) || !remote.ValidSlotID(slot) || objectName(slot) != name {
		return nil, nil // not a slot's Job: the dispatch's own, which Adopt looked for
	}
	defer p.lockStart(name)()
	job, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("adopt %q from a warm slot: look for job %q: %w", s.ID, name, err)
	}
	if err := checkClaimedSlotJob(job, slot, s, a); err != nil {
		return nil, fmt.Errorf("adopt %q from warm slot job %s: %w; refusing to adopt", s.ID, name, err)
	}
	sl := &Slot{p: p, ID: slot, name: name, job: job.UID}
	pod, err := sl.findPod(ctx)
	if err != nil {
		return nil, fmt.Errorf("adopt %q from warm slot job %s: %w; refusing to adopt", s.ID, name, err)
	}
	// No pod: it ended and went, and the Job (backoffLimit 0) makes no other; following the
	// Job records how it ended. A pod is the claim's, or nothing is adopted.
	if pod != nil {
		if err := checkClaimedPod(pod, job, slot); err != nil {
			return nil, fmt.Errorf("adopt %q from warm slot job %s: %w; refusing to adopt", s.ID, name, err)
		}
	}
	var sess *remote.Session
	if r, ok := p.opts.Exporter.(Reattacher); ok && !p.hasSession(name) {
		if sess, err = r.Reattach(ctx, s); err != nil {
			return nil, fmt.Errorf("adopt %q from warm slot job %s: re-attach to the gateway session: %w", s.ID, name, err)
		}
	}
	start := a.Started
	if start.IsZero() {
		start = time.Now()
	}
	// The slot's id, as Slot.Run follows it: the pod carries the slot's labels, not the
	// dispatch's. The Secret is the slot's, owned by its Job: deleted at the end by name. The
	// claimed pod is pinned: one the Job makes after these checks never ran the dispatch
	// (a replacement's end is not the dispatch's).
	return p.followSlot(ctx, compute.Spec{ID: slot, Stderr: s.Stderr}, name, job.UID, sess, "", start, types.UID(job.Annotations[annotationClaimedPod])), nil
}

// checkClaimedSlotJob says why job is not slot's Job of home a.Home (or a.Former) claimed by
// s.ID, with s's deadline; nil when it is.
func checkClaimedSlotJob(job *batchv1.Job, slot string, s compute.Spec, a SlotAdoption) error {
	claimed := job.Annotations[annotationClaimed]
	switch {
	case !slotLabelled(job.Labels, slot) || !slotLabelled(job.Spec.Template.Labels, slot):
		return fmt.Errorf("it is not agora's warm slot %s's job", slot)
	case job.Labels[labelHome] != a.Home && !slices.Contains(a.Former, job.Labels[labelHome]):
		return fmt.Errorf("it is another home's slot (%q)", job.Labels[labelHome])
	case claimed == "":
		return fmt.Errorf("the slot was never claimed")
	case claimed != s.ID:
		return fmt.Errorf("the slot was claimed by dispatch %q", claimed)
	case job.Annotations[annotationClaimedPod] == "":
		return fmt.Errorf("its claim names no pod")
	case job.DeletionTimestamp != nil:
		return fmt.Errorf("it is being deleted")
	}
	if t := s.Limits.Timeout; t > 0 {
		ads := job.Spec.ActiveDeadlineSeconds
		if ads == nil {
			return fmt.Errorf("it has no deadline; the dispatch's timeout is %v", t)
		}
		from := job.CreationTimestamp.Time
		if job.Status.StartTime != nil {
			from = job.Status.StartTime.Time
		}
		started := a.Started
		if started.IsZero() {
			started = time.Now()
		}
		if end := from.Add(time.Duration(*ads) * time.Second); end.After(started.Add(t + claimSlack + deadlineSlop)) {
			return fmt.Errorf("its deadline (%s) is past the dispatch's timeout of %v from its claim", end.UTC().Format(time.RFC3339), t)
		}
	}
	return nil
}

// checkClaimedPod says why pod is not the pod of slot's Job that its claim checked, unchanged
// and still its slot's; nil when it is.
func checkClaimedPod(pod *corev1.Pod, job *batchv1.Job, slot string) error {
	c := metav1.GetControllerOf(pod)
	switch {
	case c == nil || c.UID != job.UID:
		return fmt.Errorf("pod %s is not its job's", pod.Name)
	case pod.UID != types.UID(job.Annotations[annotationClaimedPod]):
		return fmt.Errorf("pod %s (uid %s) is not the pod its claim checked (%s)", pod.Name, pod.UID, job.Annotations[annotationClaimedPod])
	case len(pod.Spec.EphemeralContainers) != 0:
		return fmt.Errorf("pod %s was given an ephemeral container", pod.Name)
	case !slotLabelled(pod.Labels, slot):
		return fmt.Errorf("pod %s's labels changed (its network policy would not select it)", pod.Name)
	case containersHash(pod.Spec) != containersHash(job.Spec.Template.Spec):
		return fmt.Errorf("pod %s's containers or volumes are not its job's", pod.Name)
	}
	return nil
}
