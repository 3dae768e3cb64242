package selftest

import (
	"context"
	"fmt"
	"strings"
)

// The observations of the network, gateway, audit and verdict attacks: what agora's own
// records and the runner's host-side fixtures say, never the program's word alone.
const (
	// ObserveRefused: blocked when the dispatch's record shows its egress proxy refused a
	// connection or request and reached no host; allowed when the proxy reached one or
	// refused nothing (no proxy stood in the way).
	ObserveRefused = "refused"
	// ObserveFixture: allowed when one of the runner's host-side fixtures (a listener on the
	// host's IPv6 loopback, a DNS resolver on its loopback, the granted host, a Unix socket
	// of the host) got the run's nonce.
	ObserveFixture = "fixture"
	// ObserveModel: allowed when the scripted model on the host's loopback got a request
	// carrying the run's mark (the gateway forwarded it).
	ObserveModel = "model"
	// ObserveApproval: allowed when the dispatch's record holds an approval whose call id
	// carries the run's mark (a person was asked about a call the sandbox made up).
	ObserveApproval = "approval"
	// ObserveAudit: allowed when an entry of the dispatch's in the throw-away home's audit log
	// holds the run's mark ("allowed": and records the decision allowed), or ("secret") the
	// value of the gateway env bundle's secret.
	ObserveAudit = "audit"
	// ObserveEntries: blocked when the dispatch's entries in the audit log number at most
	// the argument.
	ObserveEntries = "entries"
	// ObserveVerdict: blocked when the dispatch's verify gate is red for the reason the
	// argument names (internal/verdict's reasons), allowed when it is green.
	ObserveVerdict = "verdict"
	// ObserveVerify: after the dispatch the runner exports the throw-away home's audit log,
	// tampers with the bundle as the argument names (tamperings in audit.go) and runs agora
	// verify on it: blocked when verify finds a failed check, allowed when it passes.
	ObserveVerify = "verify"
)

// mark is what an attack puts where a fixture or the log would keep it: the nonce alone is
// in the dispatch's input, which the model's requests and some entries carry anyway.
func mark(nonce string) string { return "mark-" + nonce }

// validHostObservation checks the observations of this file's kinds and their argument.
func validHostObservation(kind, arg string) error {
	switch kind {
	case ObserveRefused, ObserveFixture, ObserveModel, ObserveApproval:
		if arg != "" {
			return fmt.Errorf("observe %s takes no argument", kind)
		}
	case ObserveAudit:
		if arg != "" && arg != "secret" && arg != "allowed" {
			return fmt.Errorf("observe audit %q: want allowed, secret or nothing", arg)
		}
	case ObserveEntries:
		var n int
		if _, err := fmt.Sscanf(arg, "%d", &n); err != nil || n < 1 {
			return fmt.Errorf("observe entries %q: want the most entries, a number from 1", arg)
		}
	case ObserveVerdict:
		if !validVerdictReason(arg) {
			return fmt.Errorf("observe verdict %q: want one of %s", arg, strings.Join(verdictReasons, ", "))
		}
	case ObserveVerify:
		if _, ok := tamperings[arg]; !ok {
			return fmt.Errorf("observe verify %q: unknown tampering", arg)
		}
	case ObserveReview:
		if arg != reviewApprove && arg != reviewReject {
			return fmt.Errorf("observe review %q: want %s or %s (what the reviewer model answers)", arg, reviewApprove, reviewReject)
		}
	default:
		return fmt.Errorf("observe %q: unknown", kind)
	}
	return nil
}

// hostSeen is what the runner gathered for this file's observations after a dispatch.
type hostSeen struct {
	// raw is the dispatch's record as `agora dispatch run -o json` printed it.
	raw []byte
	// fixture is what a fixture saw carrying the nonce (or the model the mark), "" for
	// nothing.
	fixture string
	// entries are the dispatch's entries in the throw-away home's audit log (for audit and
	// entries).
	entries []logEntry
	// verify is agora verify's answer on a tampered bundle (for verify).
	verify *verifyAnswer
}

// gather reads what a's observation needs once its dispatch (whose record printed raw)
// has ended.
func (r *run) gather(ctx context.Context, a Attack, nonce string, raw []byte) (hostSeen, error) {
	h := hostSeen{raw: raw}
	var err error
	switch a.Observe {
	case ObserveFixture:
		h.fixture = r.fx.saw(nonce)
	case ObserveModel:
		h.fixture = r.fx.modelSaw(mark(nonce))
	case ObserveAudit, ObserveEntries:
		h.entries, err = r.dispatchEntries(ctx, raw)
	case ObserveVerify:
		h.verify, err = r.tamperAndVerify(ctx, a.Arg, raw)
	}
	return h, err
}

// decideHost decides the observations of this file's kinds; the canary was checked first.
func (r *run) decideHost(a Attack, nonce string, s seen, status, said string) (string, string) {
	rec := recordOf(s.host.raw)
	if status == "" && a.Observe != ObserveEntries {
		return NotRun, "the program left no report (" + rec.State + " " + rec.Reason + ")"
	}
	switch a.Observe {
	case ObserveRefused:
		return decideRefused(rec)
	case ObserveFixture, ObserveModel:
		if s.host.fixture != "" {
			return Allowed, s.host.fixture
		}
		return Blocked, "no host-side fixture got the run's nonce; the program: " + clip(said, 100) + rec.net()
	case ObserveApproval:
		return decideApproval(rec, mark(nonce), status, said)
	case ObserveAudit:
		want, what := mark(nonce), "the run's mark"
		if a.Arg == "secret" {
			want, what = r.fx.envSecret, "the env bundle's secret"
		}
		return decideAudit(s.host.entries, want, what, a.Arg == "allowed", status, said)
	case ObserveEntries:
		return decideEntries(s.host.entries, a.Arg, rec)
	case ObserveVerdict:
		return decideVerdict(rec, a.Arg)
	case ObserveVerify:
		return decideVerify(s.host.verify)
	}
	return NotRun, "unknown observation " + a.Observe
}

// dispatchArgs are the flags the runner adds to a's `agora dispatch run`: its header's,
// and the env bundle its subagent needs.
func (r *run) dispatchArgs(a Attack) []string {
	args := append([]string(nil), a.Dispatch...)
	if a.Subagent == "gw" {
		args = append(args, "--env", envModel)
	}
	return args
}

// subagentFor names the throw-away catalog's subagent that runs a.
func subagentFor(a Attack) string {
	switch a.Subagent {
	case "net":
		return subagentNetName
	case "gw":
		return subagentGWName
	}
	return subagentName
}
