package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// Two Starts of one dispatch (a supervisor restarted while the first still starts, or two
// callers in one process) must end with one Job, and the loser must leave alone everything
// the winner's pod needs: its gateway session (exporting again revokes the token) and its
// NetworkPolicy (deleting it leaves the pod unconfined). So a Start exports nothing and
// replaces no policy until it holds the dispatch's claim:
//
//   - in this process, a per-dispatch lock ([Provider.lockStart]): the second Start waits for
//     the first and adopts its Job, without re-attaching to the session the first one holds;
//   - across processes, the NetworkPolicy itself: creating it is the claim. A Start that finds
//     it taken waits for the Job to appear and adopts it. A policy is stale, and replaced, only
//     when the Job that owned it is gone (it has an owner reference) or when no Job appeared
//     in [claimWait] of watching it (a start that crashed before creating its Job).

// claimWait is how long a policy without a Job is left to the Start that made it. A start
// takes seconds; a longer wait only delays the retry of a start that crashed half-way.
var claimWait = 2 * time.Minute

// claimPoll is how often a waiting Start looks for the winner's Job.
const claimPoll = 100 * time.Millisecond

// startLock is the in-process claim on one dispatch: refs counts the Starts holding or
// waiting for it, so the map forgets names nobody starts.
type startLock struct {
	mu   sync.Mutex
	refs int
}

// lockStart serialises this process's Starts of one Job name; the returned func unlocks.
func (p *Provider) lockStart(name string) func() {
	p.mu.Lock()
	l := p.starting[name]
	if l == nil {
		l = &startLock{}
		p.starting[name] = l
	}
	l.refs++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.starting, name)
		}
		p.mu.Unlock()
	}
}

// holdSession and releaseSession count this process's handles that hold a Job's gateway
// session; hasSession tells an adopting Start not to re-attach (re-attaching takes the
// streams over and, at its end, closes the session under the live handle).
func (p *Provider) holdSession(name string) {
	p.mu.Lock()
	p.sessions[name]++
	p.mu.Unlock()
}

func (p *Provider) releaseSession(name string) {
	p.mu.Lock()
	if p.sessions[name]--; p.sessions[name] <= 0 {
		delete(p.sessions, name)
	}
	p.mu.Unlock()
}

func (p *Provider) hasSession(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[name] > 0
}

// claim creates the dispatch's NetworkPolicy (egress to gw alone) and returns its UID once
// this Start holds it, or the handle of the Job another Start made meanwhile.
func (p *Provider) claim(ctx context.Context, s compute.Spec, name string, gw gatewayAddr) (types.UID, compute.Handle, error) {
	netpols := p.client.NetworkingV1().NetworkPolicies(p.ns)
	np := networkPolicyObject(p.ns, name, s.ID, gw)
	var (
		watching types.UID
		since    time.Time
	)
	for {
		made, err := netpols.Create(ctx, np, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return "", nil, fmt.Errorf("start %q: create network policy %q: %w", s.ID, name, err)
			}
			return made.UID, nil, nil
		}
		// The policy first, then the Job: the winner makes its Job before its policy gets an
		// owner, so an owned policy read before a Job is missing means that Job is gone.
		// (Job first could miss a Job made between the two reads and take the winner's
		// fresh owner for a dead one.)
		old, err := p.findPolicy(ctx, name)
		if err != nil {
			return "", nil, fmt.Errorf("start %q: %w", s.ID, err)
		}
		if h, err := p.adopt(ctx, s, name); h != nil || err != nil {
			return "", h, err
		}
		if old == nil {
			continue // deleted meanwhile: claim it
		}
		if old.UID != watching || since.IsZero() {
			watching, since = old.UID, time.Now()
		}
		if len(old.OwnerReferences) > 0 || time.Since(since) >= claimWait {
			// Stale. The UID precondition deletes this policy only, never a newer claim.
			err := netpols.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return "", nil, fmt.Errorf("start %q: replace stale network policy %q: %w", s.ID, name, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return "", nil, fmt.Errorf("start %q: waiting for the start that holds network policy %q: %w", s.ID, name, context.Cause(ctx))
		case <-time.After(claimPoll):
		}
	}
}

// findPolicy returns the NetworkPolicy named name, nil when there is none. It lists (agora's
// Role may list policies, not get them) and matches the name itself.
func (p *Provider) findPolicy(ctx context.Context, name string) (*networkingv1.NetworkPolicy, error) {
	l, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, fmt.Errorf("look for network policy %q: %w", name, err)
	}
	for i := range l.Items {
		if l.Items[i].Name == name {
			return &l.Items[i], nil
		}
	}
	return nil, nil
}
