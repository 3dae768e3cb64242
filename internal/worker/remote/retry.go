package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// The gateway can be away for a while with nothing wrong with the dispatch: `agora orch serve
// --gateway` restarted (a crash, an upgrade, its pod rescheduled), its sessions kept in
// AGORA_HOME, where the restarted gateway finds them again. The worker rides that out: a
// request that got no answer, or an answer that says "not now" (429, 503, 504), is tried
// again after a jittered backoff that doubles from retryFirst to retryMax, until OutageLimit has passed
// since the first failure. Then the worker gives up with an [UnreachableError], and exits
// [remote.ExitGatewayUnreachable], so the host records the outage as what it is and never
// blames the agent.
var (
	// OutageLimit is how long the worker keeps trying a gateway that does not answer.
	OutageLimit = 3 * time.Minute
	retryFirst  = 100 * time.Millisecond
	retryMax    = 2 * time.Second
)

// UnreachableError is a gateway that did not answer for [OutageLimit].
type UnreachableError struct {
	Op  string        // what was tried: "GET session", "tunnel gateway/gateway.sock"
	For time.Duration // how long it was tried
	Err error         // the last failure
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: the gateway did not answer for %s: %v", e.Op, e.For.Round(time.Second), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// LostError is a once-only answer (the secrets object) that the gateway gave to an attempt
// whose answer never arrived (the gateway died sending it): it serves it to nobody again.
// Like an [UnreachableError] it is the gateway's outage, never the agent's doing.
type LostError struct {
	Op  string
	Err error // the gateway's refusal of the retry
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%s: the gateway served it once, to an attempt whose answer its outage cut off (%v)", e.Op, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// retrier paces the attempts of one operation, and says on log (nil: nowhere) when the
// gateway stops answering it and when it answers again.
type retrier struct {
	op    string
	log   io.Writer
	first time.Time // the first failure
	next  time.Duration
	// unanswered: an attempt got no answer at all (its connection ended first), so the
	// gateway may have done what it asked.
	unanswered bool
}

// retry starts the retries of op.
func (c *Client) retry(op string) *retrier { return &retrier{op: op, log: c.log} }

// recovered notes that op got its answer after failures.
func (r *retrier) recovered() {
	if !r.first.IsZero() && r.log != nil {
		fmt.Fprintf(r.log, "agora worker: the gateway answers %s again after %s\n", r.op, time.Since(r.first).Round(time.Millisecond))
	}
	r.first = time.Time{}
}

// wait sleeps before the next attempt after err, or returns why there is none: ctx ended, or
// the outage lasted OutageLimit (an [UnreachableError]).
func (r *retrier) wait(ctx context.Context, err error) error {
	return r.waitOr(ctx, err, nil)
}

// waitOr is wait, cut short when wake receives.
func (r *retrier) waitOr(ctx context.Context, err error, wake <-chan struct{}) error {
	now := time.Now()
	if r.first.IsZero() {
		r.first, r.next = now, retryFirst
		if r.log != nil {
			fmt.Fprintf(r.log, "agora worker: the gateway does not answer %s (%v); retrying for up to %s\n", r.op, err, OutageLimit)
		}
	}
	if now.Sub(r.first) >= OutageLimit {
		return &UnreachableError{Op: r.op, For: now.Sub(r.first), Err: err}
	}
	// Half the backoff plus a random half: the pods that lost a gateway together do not all
	// come back in the same instant (they would crowd its unauthenticated pools).
	d := r.next/2 + rand.N(r.next/2+1)
	d = min(d, OutageLimit-now.Sub(r.first))
	r.next = min(2*r.next, retryMax)
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s: %w (after %v)", r.op, context.Cause(ctx), err)
	case <-time.After(d):
		return nil
	case <-wake:
		return nil
	}
}

// localError is a request that failed on the worker's side before any gateway was involved
// (its body could not be made: the upload's Pack): retrying it would only fail again, and
// giving up on it as [UnreachableError] would blame the gateway for it (an
// agent's unreadable output file made the worker exit 75, recorded gateway-unreachable).
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// transient reports whether a request's failure may pass: anything but a certificate the
// gateway's CA does not vouch for, a failure of the worker's own ([localError]), or the
// caller's own end.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.As(err, new(*localError)) {
		return false
	}
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return !errors.As(err, &cv) && !errors.As(err, &ua) && !errors.As(err, &he) && !errors.As(err, &ci)
}

// transientStatus reports an answer that says "not now": the gateway's connection limits, or
// an upload of the mount still in progress. (502 is a host socket that does not answer: the
// dispatch's supervisor is gone, which waiting does not mend.)
func transientStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
