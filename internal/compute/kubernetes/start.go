package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Reattacher is an [remote.Exporter] that can hand back the live session of a dispatch whose
// pod already runs (it holds that session's token), so a restarted supervisor that adopts
// the Job gets the worker's streams and revokes the token at the end. Without it an adopted
// Job is followed to its end with no session.
type Reattacher interface {
	Reattach(ctx context.Context, spec compute.Spec) (*remote.Session, error)
}

// cleanupTimeout bounds the requests that undo a half-made start or delete a finished
// dispatch's Secret, which run after the caller's context may be gone.
const cleanupTimeout = 30 * time.Second

// Start creates the dispatch's Secret, NetworkPolicy and Job, or adopts the dispatch's Job
// when it exists already, and returns once the Job exists (its pod may still be pending).
// Cancelling ctx deletes the Job.
func (p *Provider) Start(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	env, err := p.checkSpec(s)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	name := objectName(s.ID)
	defer p.lockStart(name)()
	if h, err := p.adopt(ctx, s, name); h != nil || err != nil {
		return h, err
	}
	if err := p.checkRuntimeClass(ctx); err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	// Resolved once: the policy and the pod's /etc/hosts get the same addresses.
	gw, err := p.resolveGateway(ctx)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	// Nothing is exported or replaced before this Start holds the dispatch (claim.go).
	npUID, h, err := p.claim(ctx, s, name, gw)
	if h != nil || err != nil {
		return h, err
	}
	// The worker's binary comes from the worker image, through the init container: the host's
	// binary is not exported.
	exported := s
	exported.Binds = nil
	for _, b := range s.Binds {
		if b.Dst != s.Argv[0] {
			exported.Binds = append(exported.Binds, b)
		}
	}
	sess, err := p.export(ctx, exported, name, npUID)
	if errors.Is(err, errClaimLost) {
		// Another Start took the claim over while this one stalled, and exported already:
		// its session, which its pod's token opens, stays. Follow its Job.
		return p.yield(ctx, s, name, nil, err)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start %q: export to the gateway: %w", s.ID, err), p.deleteParts(name, npUID, ""))
	}
	h, err = p.create(ctx, s, name, npUID, env, sess, gw)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start %q: %w", s.ID, err), closeSession(sess))
	}
	return h, nil
}

// export registers the dispatch's session with the gateway. With a [remote.ClaimExporter] (the
// real gateway's registry, which the supervisors of one AGORA_HOME share), a session that
// stands already, another Start's, is replaced only while this Start's claim (the policy of
// uid npUID) stands: a Start that froze past claimWait and was judged stale must not revoke
// the token of the pod that the Start which replaced its claim made.
func (p *Provider) export(ctx context.Context, s compute.Spec, name string, npUID types.UID) (*remote.Session, error) {
	ce, ok := p.opts.Exporter.(remote.ClaimExporter)
	if !ok {
		return p.opts.Exporter.Export(ctx, s)
	}
	return ce.ExportIf(ctx, s, func(ctx context.Context) error {
		np, err := p.findPolicy(ctx, name)
		switch {
		case err != nil:
			return err
		case np == nil || np.UID != npUID:
			return errClaimLost
		}
		return nil
	})
}

// checkSpec refuses what a pod cannot honour, rather than run it differently.
func (p *Provider) checkSpec(s compute.Spec) ([]envVar, error) {
	if err := checkDispatchID(s.ID); err != nil {
		return nil, err
	}
	switch {
	case s.Sandbox == compute.SandboxNone:
		return nil, errors.New("sandbox: none runs on the host only; a kubernetes target always runs in its pod")
	case s.Sandbox != "" && s.Sandbox != compute.SandboxBwrap:
		return nil, fmt.Errorf("unknown sandbox %q", s.Sandbox)
	case s.Network:
		return nil, errors.New("network: host is not available on a kubernetes target; its pod reaches only the gateway")
	case len(s.Argv) == 0:
		return nil, errors.New("empty argv")
	case s.RunAs != nil && (s.RunAs.UID == 0 || s.RunAs.GID == 0):
		return nil, errors.New("run as uid or gid 0 refused")
	}
	return splitEnv(s.Env)
}

// create makes the objects in the order that never leaves a pod unconfined: the
// NetworkPolicy is there already (claim made it: it selects the pod before the pod exists),
// then the Secret (whose orphans Sweep finds through the NetworkPolicy of the same name, so it
// never needs to list Secrets), then the Job; last the Job becomes their owner, so deleting
// it deletes them.
func (p *Provider) create(ctx context.Context, s compute.Spec, name string, npUID types.UID, env []envVar, sess *remote.Session, gw gatewayAddr) (compute.Handle, error) {
	if sess.Dispatch != s.ID {
		return nil, fmt.Errorf("the gateway exported dispatch %q for %q", sess.Dispatch, s.ID)
	}
	if err := checkMounts(sess.Mounts); err != nil {
		return nil, fmt.Errorf("gateway session: %w", err)
	}
	sec := secretObject(p.ns, name, s.ID, sess.Token, p.opts.GatewayCA, env)
	// Owned by this Start's claim until the Job owns it: should the claim be judged stale and
	// replaced, the garbage collector takes this Secret with it, and nobody deletes it by name.
	sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Name: name, UID: npUID}}
	secUID, err := p.createSecret(ctx, sec, npUID)
	if errors.Is(err, errClaimLost) {
		// Another Start replaced this one's claim: follow its Job, touch nothing of its.
		return p.yield(ctx, s, name, sess, err)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create secret %q: %w", name, err), p.deleteParts(name, npUID, ""))
	}
	in := jobInput{name: name, id: s.ID, spec: s, env: env, mounts: sess.Mounts, gateway: gw}
	if p.agentSandbox() {
		return p.createSandbox(ctx, s, in, npUID, secUID, sess)
	}
	job := p.jobObject(in)
	made, err := p.client.BatchV1().Jobs(p.ns).Create(ctx, job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another Start of the same dispatch won the race: follow its Job, never a second.
		return p.yield(ctx, s, name, sess, fmt.Errorf("job %q exists and vanished again", name))
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create job %q: %w", name, err), p.deleteParts(name, npUID, secUID))
	}
	if err := p.ownParts(ctx, jobOwner(made), npUID, secUID); err != nil {
		// The Job runs: cancel it rather than leave it without its cleanup.
		return nil, errors.Join(fmt.Errorf("make job %q own its secret and network policy: %w", name, err),
			p.deleteJob(name, made.UID), p.deleteParts(name, npUID, secUID))
	}
	return p.follow(ctx, s, name, made.UID, false, sess, secUID, time.Now()), nil
}

// yield ends a Start that lost the dispatch to another: it closes its own session and adopts
// the winner's Job; without one, gone is the error.
func (p *Provider) yield(ctx context.Context, s compute.Spec, name string, sess *remote.Session, gone error) (compute.Handle, error) {
	if err := closeSession(sess); err != nil {
		return nil, err
	}
	h, err := p.adopt(ctx, s, name)
	if h == nil && err == nil {
		err = gone
	}
	return h, err
}

// errClaimLost: the dispatch's NetworkPolicy is not the one this Start created any more.
var errClaimLost = errors.New("another start replaced this one's claim on the dispatch")

// secretWait bounds how long a Start waits for the garbage collector to remove a Secret of the
// dispatch's name left by an earlier start, whose claim is gone.
var secretWait = 30 * time.Second

// createSecret creates sec and returns its UID. A Secret of that name already there is never
// deleted by name (the provider may not read Secrets, so it cannot tell whose it is): one made
// by a start whose claim was replaced is owned by that claim and goes with it (the garbage
// collector), so createSecret waits for it, as long as this Start's claim (the policy of UID
// npUID) stands; when another Start holds the claim now, it returns errClaimLost.
func (p *Provider) createSecret(ctx context.Context, sec *corev1.Secret, npUID types.UID) (types.UID, error) {
	secrets := p.client.CoreV1().Secrets(p.ns)
	deadline := time.Now().Add(secretWait)
	for {
		made, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
		if err == nil {
			return made.UID, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		np, ferr := p.findPolicy(ctx, sec.Name)
		switch {
		case ferr != nil:
			return "", ferr
		case np == nil || np.UID != npUID:
			return "", errClaimLost
		case time.Now().After(deadline):
			return "", fmt.Errorf("a Secret %q is there and is not this start's: it was not removed with the claim it belonged to "+
				"(an agora older than this one made it, or someone else); delete it if no pod uses it", sec.Name)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(claimPoll):
		}
	}
}

// ownParts makes the Job the owner of the Secret and the NetworkPolicy. Each patch carries
// the UID this Start created the object with as a precondition: a policy or Secret replaced
// meanwhile (another Start judged this one stale) fails the start rather than guard the Job by
// chance, or hand the other Start's Secret to this Start's Job, whose deletion would take it
// along (the winner's pod would lose its token that way).
func (p *Provider) ownParts(ctx context.Context, o owner, npUID, secUID types.UID) error {
	owner := fmt.Sprintf(`"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}]`, o.apiVersion, o.kind, o.name, o.uid)
	patch := []byte(`{"metadata":{` + owner + `}}`)
	if secUID != "" {
		patch = fmt.Appendf(nil, `{"metadata":{"uid":%q,%s}}`, secUID, owner)
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if npUID != "" {
		patch = fmt.Appendf(nil, `{"metadata":{"uid":%q,%s}}`, npUID, owner)
	}
	_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// owner is the object a dispatch's Secret and NetworkPolicy belong to: its Job or Sandbox.
type owner struct {
	apiVersion, kind, name string
	uid                    types.UID
}

func jobOwner(j *batchv1.Job) owner { return owner{"batch/v1", "Job", j.Name, j.UID} }

// adopt returns a handle following the dispatch's existing Job or Sandbox, nil when there is
// neither, or an error when the name is taken by something that is not this dispatch's. It
// looks for both kinds, the target's backend's first: a dispatch started before the target's
// backend was switched is still running as the other kind, and a Start that found nothing
// would judge its owned NetworkPolicy stale and delete it under the running pod (found by
// TestAgentSandboxBackend_SwitchedBackendAdoptsNotReplaces). The other kind's lookup treats
// "not served" and "not allowed" (no CRD, a Role without it) as none.
func (p *Provider) adopt(ctx context.Context, s compute.Spec, name string) (compute.Handle, error) {
	first, second := p.adoptJob, p.adoptSandbox
	if p.agentSandbox() {
		first, second = p.adoptSandbox, p.adoptJob
	}
	h, err := first(ctx, s, name, false)
	if h == nil && err == nil {
		h, err = second(ctx, s, name, true)
	}
	if hh, ok := h.(*handle); ok {
		hh.resumed = true // made by another process: compute.Resumed
	}
	return h, err
}

// adoptJob is adopt's look for a Job; other: the Job is not the target's backend's kind.
func (p *Provider) adoptJob(ctx context.Context, s compute.Spec, name string, other bool) (compute.Handle, error) {
	job, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (other && apierrors.IsForbidden(err)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start %q: look for job %q: %w", s.ID, name, err)
	}
	if !ownedBy(job.Labels, s.ID) {
		return nil, fmt.Errorf("start %q: job %q exists and is not agora's for this dispatch; refusing to touch it", s.ID, name)
	}
	var sess *remote.Session
	if r, ok := p.opts.Exporter.(Reattacher); ok && !p.hasSession(name) {
		if sess, err = r.Reattach(ctx, s); err != nil {
			return nil, fmt.Errorf("start %q: re-attach to the gateway session: %w", s.ID, err)
		}
	}
	start := time.Now()
	if job.Status.StartTime != nil {
		start = job.Status.StartTime.Time
	}
	return p.follow(ctx, s, name, job.UID, false, sess, "", start), nil
}

// deleteParts deletes what a Start that failed before its Job owned them made: its
// NetworkPolicy and its Secret, each only with the UID this Start created it with (an empty
// UID deletes nothing), so a Start judged stale never deletes the objects of the Start that
// replaced it. What is gone already is no error.
func (p *Provider) deleteParts(name string, npUID, secUID types.UID) error {
	if err := fenced(fmt.Sprintf("delete the network policy and secret %q", name)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	if secUID != "" {
		err := p.client.CoreV1().Secrets(p.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &secUID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete secret %q: %w", name, err))
		}
	}
	if npUID != "" {
		err := p.client.NetworkingV1().NetworkPolicies(p.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &npUID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete network policy %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func closeSession(s *remote.Session) error {
	if s == nil || s.Close == nil {
		return nil
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("close gateway session: %w", err)
	}
	return nil
}
