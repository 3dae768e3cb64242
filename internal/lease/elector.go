package lease

import (
	"context"
	"log/slog"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// elector is client-go's leader election algorithm (tools/leaderelection: tryAcquireOrRenew)
// over one coordination.k8s.io/v1 Lease, with two changes. It moves the fence on every write
// that makes this process the holder. And it renews without waiting only a record it wrote
// itself: a record naming this identity but written by someone else (a previous process of
// this replica, or a second one started by mistake) is waited out like a foreign holder's.
// It does not link client-go's package itself: that links the typed clientset's scheme,
// whose init every agora process would pay (see leaseclient.go).
type elector struct {
	cfg   Config
	api   leaseAPI
	log   *slog.Logger
	fence *Fence

	// observed is the record last seen, and observedAt when (on the fence's clock, this
	// host's CLOCK_BOOTTIME) it was first seen: a holder has expired once its duration passed
	// since then with no new record, whatever the record's own times say.
	observed   *coordv1.Lease
	observedAt instant
	// written is the resourceVersion of the record this process last wrote.
	written string
	// previous is the holder this process took the Lease from: the last identity it saw
	// holding it in a record it did not write, its own included (a released Lease names no
	// holder).
	previous, seen string
}

// try takes or renews the Lease once. It reports whether this process holds it now, and
// otherwise who does while their lease runs ("" if no one, or the Lease could not be read).
func (e *elector) try(ctx context.Context) (ok bool, holder string) {
	ctx, cancel := context.WithTimeout(ctx, e.retryPeriod())
	defer cancel()
	cur, err := e.api.Get(ctx, e.cfg.Name)
	// now is read after the Get answered, never before: the record it returns may have been
	// written while the Get was on its way, after the holder sent that renew, and the
	// holder's fence runs from the send. A view started before the read would start the
	// wait before the fence did and eat the fence's fifth of margin.
	now := e.fence.now()
	if apierrors.IsNotFound(err) {
		return e.create(ctx, now), ""
	}
	if err != nil {
		e.log.Warn("read the leader lease", "err", err)
		return false, ""
	}
	if e.observed == nil || cur.ResourceVersion != e.observed.ResourceVersion {
		e.observed, e.observedAt = cur, now
	}
	holder = deref(cur.Spec.HolderIdentity)
	mine := holder == e.cfg.Identity && cur.ResourceVersion == e.written
	// Our own identity in a record this process did not write is another process's (a
	// StatefulSet's new pod of a killed leader sees its dead predecessor's): it is the holder
	// taken over from, as a foreign one is, so that leader.acquired names it.
	if holder != "" && !mine {
		e.seen = holder
	}
	if holder != "" && !mine && now < e.observedAt.add(e.holderDuration(cur)) {
		return false, holder
	}
	next := cur.DeepCopy()
	// The record's times are wall times for other readers (kubectl, client-go); no elector
	// here trusts them.
	stamp := metav1.NewMicroTime(time.Now())
	next.Spec.RenewTime = &stamp
	next.Spec.LeaseDurationSeconds = seconds(e.cfg.Duration)
	if !mine {
		// A take-over: of an expired holder, a released Lease, or our own identity's record
		// that this process did not write.
		id := e.cfg.Identity
		next.Spec.HolderIdentity, next.Spec.AcquireTime = &id, &stamp
		next.Spec.LeaseTransitions = ptr(deref(cur.Spec.LeaseTransitions) + 1)
	}
	sent := e.fence.now()
	got, err := e.api.Update(ctx, next)
	if err != nil {
		e.log.Warn("write the leader lease", "err", err)
		return false, ""
	}
	e.fence.renewed(sent)
	e.observed, e.observedAt, e.written = got, now, got.ResourceVersion
	if !mine {
		e.previous = e.seen
	}
	return true, ""
}

// create makes the Lease, held by this process.
func (e *elector) create(ctx context.Context, now instant) bool {
	id := e.cfg.Identity
	stamp := metav1.NewMicroTime(time.Now())
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name, Namespace: e.cfg.Namespace},
		Spec: coordv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: seconds(e.cfg.Duration), AcquireTime: &stamp, RenewTime: &stamp, LeaseTransitions: ptr[int32](0)}}
	sent := e.fence.now()
	got, err := e.api.Create(ctx, l)
	if err != nil {
		if !apierrors.IsAlreadyExists(err) {
			e.log.Warn("create the leader lease", "err", err)
		}
		return false
	}
	e.fence.renewed(sent)
	e.observed, e.observedAt, e.written = got, now, got.ResourceVersion
	return true
}

// release hands the Lease back if the record is still the one this process wrote (the
// update is conditional on its resourceVersion), as client-go's ReleaseOnCancel does: no
// holder and a one-second duration, so a standby takes it at its next look.
func (e *elector) release() {
	if e.observed == nil || e.written == "" || e.observed.ResourceVersion != e.written {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.renewDeadline())
	defer cancel()
	next := e.observed.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	empty := ""
	next.Spec.HolderIdentity, next.Spec.LeaseDurationSeconds = &empty, ptr[int32](1)
	next.Spec.RenewTime, next.Spec.AcquireTime = &now, &now
	if _, err := e.api.Update(ctx, next); err != nil {
		e.log.Warn("hand back the leader lease", "err", err)
	}
}

// holderDuration is how long a holder's record is waited out once seen: the duration it
// says, but never less than this replica's own. The record is only the holder's word, and
// anyone with write access to the Lease can lower it (leaseDurationSeconds 1 or 0) while the
// holder, cut off from the apiserver, never reads the edit and keeps its fence open 4/5 of
// its own duration; replicas of one agora.yaml share that duration.
func (e *elector) holderDuration(l *coordv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds <= 0 {
		return e.cfg.Duration
	}
	return max(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second, e.cfg.Duration)
}

// seconds is d in whole seconds, rounded up (at least one): the record must never say less
// than the fence it stands for, or a standby trusting it (another agora version, a
// client-go elector) would take over while the holder's fence is open. 2.5s said as 2s
// left a 2s fence against a 2s wait: no margin at all.
func seconds(d time.Duration) *int32 {
	return ptr(int32(max((d+time.Second-1)/time.Second, 1)))
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
