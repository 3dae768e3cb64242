package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Config names the Lease and this replica.
type Config struct {
	// Name and Namespace are the Lease's.
	Name, Namespace string
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// Identity is this replica's holderIdentity.
	Identity string
	// Duration is the lease duration: renews are due every Duration/5 and given up after
	// 2/3 of it; the fence stays open 4/5 of it past a renew's send.
	Duration time.Duration
	// Log receives the elector's messages; nil drops them.
	Log *slog.Logger
}

// Leader is this process's leadership of a Lease, from [Elect] until [Leader.Release] or its
// loss (see [Leader.Lost]).
type Leader struct {
	// Fence is open while this process leads; hand Fence.Check to store.SetFence.
	Fence *Fence
	// Previous is the identity that held the Lease before this process took it, "" if none.
	Previous string
	// Acquired is when this process took the Lease.
	Acquired time.Time

	e        *elector
	lost     chan struct{}
	lostOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// ErrLost is what serve stops with when leadership ended while it served.
var ErrLost = errors.New("lost the leader lease")

// Elect waits, as a standby, until this process holds the Lease, and returns its leadership;
// it keeps renewing it in the background. It returns ctx's error if ctx ends first. No
// Kubernetes client is made before Elect is called.
func Elect(ctx context.Context, c Config) (*Leader, error) {
	api, err := newLeaseClient(c.Kubeconfig, c.Namespace, c.Duration)
	if err != nil {
		return nil, err
	}
	return elect(ctx, c, api, bootNow)
}

// elect is Elect over api, with every instant the elector and its fence compare read from
// now (bootNow; the tests' fake clock).
func elect(ctx context.Context, c Config, api leaseAPI, now clock) (*Leader, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &elector{cfg: c, api: api, log: log, fence: NewFence(c.Namespace+"/"+c.Name, c.Duration)}
	e.fence.now = now
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Leader{Fence: e.fence, Previous: e.previous, Acquired: time.Now(), e: e, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		e.renew(rctx)
		// However renewing ended, the fence is shut before anyone hears of it.
		e.fence.Shut()
		l.lostOnce.Do(func() { close(l.lost) })
		if rctx.Err() != nil {
			e.release()
		}
	}()
	return l, nil
}

// Lost is closed when leadership ends: no renew succeeded for 2/3 of the duration, another
// replica took the Lease, or [Leader.Release] ran. The fence is shut by then.
func (l *Leader) Lost() <-chan struct{} { return l.lost }

// Release shuts the fence, stops renewing and hands the Lease back (holderIdentity emptied,
// so a standby takes it at its next retry instead of after the duration) if this process
// still holds it, then returns. Call it only after everything that commits has stopped.
func (l *Leader) Release() {
	l.Fence.Shut()
	l.cancel()
	<-l.done
}

// Name is namespace/lease.
func (l *Leader) Name() string { return l.e.cfg.Namespace + "/" + l.e.cfg.Name }

// Namespace is the Lease's namespace.
func (l *Leader) Namespace() string { return l.e.cfg.Namespace }

// LeaseName is the Lease's name.
func (l *Leader) LeaseName() string { return l.e.cfg.Name }

// Identity is this replica's holderIdentity.
func (l *Leader) Identity() string { return l.e.cfg.Identity }

// retryPeriod is how often a standby looks at the Lease and a leader renews it.
func (e *elector) retryPeriod() time.Duration { return e.cfg.Duration / 5 }

// renewDeadline is how long a leader keeps trying to renew before it gives up.
func (e *elector) renewDeadline() time.Duration { return e.cfg.Duration * 2 / 3 }

// acquire tries every retry period until this process holds the Lease or ctx ends.
func (e *elector) acquire(ctx context.Context) error {
	t := time.NewTicker(e.retryPeriod())
	defer t.Stop()
	for {
		if ok, _ := e.try(ctx); ok {
			e.log.Info("acquired the leader lease", "identity", e.cfg.Identity, "previous", e.previous)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// renew renews the Lease every retry period until ctx ends, another replica holds it, or no
// renew succeeded for the renew deadline.
func (e *elector) renew(ctx context.Context) {
	t := time.NewTicker(e.retryPeriod())
	defer t.Stop()
	// last is on the fence's clock: a renew loop resumed after a suspend sees the time asleep.
	last := e.fence.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, taken := e.try(ctx)
		switch {
		case ok:
			last = e.fence.now()
		case taken != "":
			e.log.Error("the leader lease is held by another replica", "holder", taken)
			return
		case e.fence.now().sub(last) > e.renewDeadline():
			e.log.Error("could not renew the leader lease in time", "for", e.fence.now().sub(last).Round(time.Millisecond).String())
			return
		}
	}
}
