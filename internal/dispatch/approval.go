package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// A call a capability marks for approval is held: the gateway asks the dispatch's
// supervisor, which records a pending approval (RequestApproval) and waits until a person
// decides it from any process (`agora dispatch approve`/`deny`, DecideApproval) or it
// expires (ExpireApproval). Each of those is one transaction with its audit entry. Approval
// is never offered over MCP: no MCP tool reaches DecideApproval.

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// PhaseAwaitingApproval is [Record.Phase] while a call of the dispatch is held.
const PhaseAwaitingApproval = "awaiting_approval"

// SystemActor decides what no person decided: an expired approval.
const SystemActor = "system"

// maxApprovalReason caps the reason a person gives for a denial.
const maxApprovalReason = 1024

// ErrApprovalNotPending means the call has no pending approval: it was decided, expired,
// or never held.
var ErrApprovalNotPending = errors.New("no pending approval")

// Approval is one held call of a dispatch and how it was decided.
type Approval struct {
	Seq        int    `json:"seq"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args_digest"`
	// Preview is the call's arguments for a person to read, never to run: the dispatch's
	// secrets masked, invisible characters escaped, the fields that say what the call acts
	// on (path, argv, url...) first and whole, cut at a fixed size with "[… N more bytes not
	// shown]" markers (a literal "…" is never content). ArgsBytes is the size of the whole
	// arguments (canonical JSON), which [Records.ApprovalArgs] returns while it is pending.
	Preview     string     `json:"preview"`
	ArgsBytes   int        `json:"args_bytes"`
	Rule        string     `json:"rule"`
	Role        string     `json:"role"`
	State       string     `json:"state"`
	Reason      string     `json:"reason,omitempty"`
	Actor       string     `json:"actor,omitempty"`
	RequestedAt time.Time  `json:"requested_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
}

// RequestApproval records a pending approval of a call of dispatch id, with its
// approval.request audit entry, and returns it with its seq and times. args is the call's
// whole arguments, masked (see [Approval]); it is kept while the call is pending and is never
// part of the audit entry. The dispatch must be live.
func (s *Records) RequestApproval(ctx context.Context, id string, a Approval, args string, timeout time.Duration) (*Approval, error) {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		r, err := getRecord(ctx, s.prepared(tx), id)
		if err != nil {
			return err
		}
		if lifecycle.DispatchEnded(r.State) {
			return fmt.Errorf("dispatch %s is %s: no call of it can be held", id, r.State)
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 1) FROM dispatch_approvals WHERE dispatch_id = ?`, id).Scan(&a.Seq); err != nil {
			return err
		}
		now := s.now().UTC()
		a.State, a.RequestedAt, a.ExpiresAt = ApprovalPending, now, now.Add(timeout)
		a.Reason, a.Actor, a.DecidedAt = "", "", nil
		if _, err := tx.ExecContext(ctx, `INSERT INTO dispatch_approvals(dispatch_id, seq, call_id, tool, args_digest,
			preview, rule, role, state, requested_at, expires_at, args, args_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, a.Seq, a.CallID, a.Tool, a.ArgsDigest, a.Preview, a.Rule, a.Role, a.State, ts(a.RequestedAt), ts(a.ExpiresAt),
			args, a.ArgsBytes); err != nil {
			return fmt.Errorf("record approval request of dispatch %s: %w", id, err)
		}
		_, err = s.log.Append(ctx, tx, audit.Entry{
			Actor: entry.GatewayActor(id, a.Role), Kind: entry.ApprovalRequest, Subject: entry.Dispatch(id),
			Details: map[string]any{
				"dispatch": id, "role": a.Role, "seq": a.Seq, "call_id": a.CallID, entry.KeyTool: a.Tool,
				"args_digest": a.ArgsDigest, "rule": a.Rule, "preview": a.Preview, "args_bytes": a.ArgsBytes,
				"expires_at": ts(a.ExpiresAt),
			},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// DecideApproval approves or denies the pending approval of call (a call id) of dispatch id
// as actor (the OS user) and returns it decided. When argsDigest is set, the pending call
// must have exactly those arguments: a person who read one preview cannot approve other
// arguments. A call id with more than one pending request needs argsDigest to choose.
func (s *Records) DecideApproval(ctx context.Context, id, call string, approve bool, reason, actor, argsDigest string) (*Approval, error) {
	if actor == "" || actor == SystemActor {
		return nil, fmt.Errorf("decide approval: the actor must be a person, not %q", actor)
	}
	if len(reason) > maxApprovalReason {
		return nil, fmt.Errorf("decide approval: reason is over %d bytes", maxApprovalReason)
	}
	state := ApprovalDenied
	if approve {
		state = ApprovalApproved
	}
	var out *Approval
	var late error
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		r, err := getRecord(ctx, s.prepared(tx), id)
		if err != nil {
			return err
		}
		pending := []Approval{}
		for _, a := range r.Approvals {
			if a.State == ApprovalPending && a.CallID == call && (argsDigest == "" || a.ArgsDigest == argsDigest) {
				pending = append(pending, a)
			}
		}
		switch {
		case len(pending) == 0:
			return s.notPending(r, call, argsDigest)
		case len(pending) > 1:
			return fmt.Errorf("call %q of dispatch %s has %d pending requests with different arguments; name one with --digest", call, id, len(pending))
		}
		if lifecycle.DispatchEnded(r.State) {
			// Its supervisor died holding the call: nothing waits for this decision.
			return fmt.Errorf("%w: dispatch %s is %s; its held calls ended with it", ErrApprovalNotPending, id, r.State)
		}
		a := pending[0]
		if !s.now().Before(a.ExpiresAt) {
			// The timeout passed and its waiter has not settled it yet (it is between
			// polls, or died and is not yet reaped): a decision now is not one given in
			// time. The call is settled expired, as the waiter would have, and the person
			// told so (committed, so the refusal is on record).
			if _, err := s.settle(ctx, tx, id, a, ApprovalExpired, "no decision within the approval timeout", SystemActor); err != nil {
				return err
			}
			late = fmt.Errorf("%w: call %q of dispatch %s expired at %s, before this decision", ErrApprovalNotPending, call, id, a.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		}
		if approve && argsDigest == "" {
			if err := heldWithOtherArgs(r, a); err != nil {
				return err
			}
		}
		if out, err = s.settle(ctx, tx, id, a, state, reason, actor); err != nil {
			return err
		}
		return nil
	})
	if err == nil && late != nil {
		return nil, late
	}
	return out, err
}

// heldWithOtherArgs refuses to approve pending call a by its call id alone when the dispatch
// held that call id before with other arguments. A call id is not the person's to choose: the
// model picks it, and anything in the sandbox can ask /approval under it. Otherwise a request
// the person read (a harmless write, forged by a granted curl) could end and the model's real
// call take its id in the meantime, and the person's approval would run arguments they never
// saw. With the digest they read, the approval binds to those arguments.
func heldWithOtherArgs(r *Record, a Approval) error {
	var others []string
	for _, o := range r.Approvals {
		if o.Seq != a.Seq && o.CallID == a.CallID && o.ArgsDigest != a.ArgsDigest && !slices.Contains(others, o.ArgsDigest) {
			others = append(others, o.ArgsDigest)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("call %q of dispatch %s was held before with other arguments (%s); the pending one has %s: read it ('agora dispatch approval show %s %s') and approve it with --digest",
		a.CallID, r.ID, strings.Join(others, ", "), a.ArgsDigest, r.ID, a.CallID)
}

// notPending explains why call has nothing to decide, naming the calls that do.
func (s *Records) notPending(r *Record, call, argsDigest string) error {
	var names []string
	for _, a := range r.Approvals {
		if a.State == ApprovalPending {
			names = append(names, a.CallID+" ("+a.Tool+", "+a.ArgsDigest+")")
		}
		if a.CallID == call && a.State != ApprovalPending && argsDigest == "" {
			return fmt.Errorf("%w: call %q of dispatch %s is already %s", ErrApprovalNotPending, call, r.ID, a.State)
		}
	}
	what := fmt.Sprintf("call %q", call)
	if argsDigest != "" {
		what += " with arguments " + argsDigest
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: %s of dispatch %s; it has no call awaiting approval", ErrApprovalNotPending, what, r.ID)
	}
	return fmt.Errorf("%w: %s of dispatch %s; awaiting approval: %s", ErrApprovalNotPending, what, r.ID, strings.Join(names, ", "))
}

// ExpireApproval decides pending approval seq of dispatch id as expired (denied, actor
// system) with reason. It does nothing when the approval is already decided.
func (s *Records) ExpireApproval(ctx context.Context, id string, seq int, reason string) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		a, err := getApproval(ctx, tx, id, seq)
		if err != nil || a.State != ApprovalPending {
			return err
		}
		_, err = s.settle(ctx, tx, id, *a, ApprovalExpired, reason, SystemActor)
		return err
	})
}

// settle moves pending approval a to state with its approval.decision entry, inside tx.
func (s *Records) settle(ctx context.Context, tx *sql.Tx, id string, a Approval, state, reason, actor string) (*Approval, error) {
	now := s.now().UTC()
	// The whole arguments are kept only while someone may still read them to decide.
	res, err := tx.ExecContext(ctx, `UPDATE dispatch_approvals SET state = ?, reason = ?, actor = ?, decided_at = ?, args = ''
		WHERE dispatch_id = ? AND seq = ? AND state = ?`, state, reason, actor, ts(now), id, a.Seq, ApprovalPending)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, fmt.Errorf("%w: call %q of dispatch %s was decided meanwhile", ErrApprovalNotPending, a.CallID, id)
	}
	a.State, a.Reason, a.Actor, a.DecidedAt = state, reason, actor, &now
	_, err = s.log.Append(ctx, tx, audit.Entry{
		Actor: actor, Kind: entry.ApprovalDecision, Subject: entry.Dispatch(id),
		Details: map[string]any{
			"dispatch": id, "role": a.Role, "seq": a.Seq, "call_id": a.CallID, entry.KeyTool: a.Tool,
			"args_digest": a.ArgsDigest, entry.KeyDecision: state, entry.KeyReason: reason,
		},
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Approval returns approval seq of dispatch id.
func (s *Records) Approval(ctx context.Context, id string, seq int) (*Approval, error) {
	return getApproval(ctx, s.db.SQL(), id, seq)
}

const approvalColumns = `seq, call_id, tool, args_digest, preview, args_bytes, rule, role, state, reason, actor, requested_at, expires_at, decided_at`

func scanApproval(row scanner) (*Approval, error) {
	var a Approval
	var requested, expires, decided string
	if err := row.Scan(&a.Seq, &a.CallID, &a.Tool, &a.ArgsDigest, &a.Preview, &a.ArgsBytes, &a.Rule, &a.Role, &a.State,
		&a.Reason, &a.Actor, &requested, &expires, &decided); err != nil {
		return nil, err
	}
	a.RequestedAt, _ = time.Parse(time.RFC3339Nano, requested)
	a.ExpiresAt, _ = time.Parse(time.RFC3339Nano, expires)
	a.DecidedAt = parseOptTime(decided)
	return &a, nil
}

// ApprovalArgs returns the whole arguments of approval seq of dispatch id, masked, as
// canonical JSON: "" once it was decided or expired (only a pending call keeps them).
func (s *Records) ApprovalArgs(ctx context.Context, id string, seq int) (string, error) {
	var args string
	err := s.db.SQL().QueryRowContext(ctx, `SELECT args FROM dispatch_approvals WHERE dispatch_id = ? AND seq = ?`, id, seq).Scan(&args)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("dispatch %s has no approval %d", id, seq)
	}
	return args, err
}

func getApproval(ctx context.Context, q queryer, id string, seq int) (*Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM dispatch_approvals WHERE dispatch_id = ? AND seq = ?`, id, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("dispatch %s has no approval %d", id, seq)
	}
	return a, err
}

// loadApprovals fills r.Approvals and r.Phase.
func loadApprovals(ctx context.Context, q queryer, r *Record) error {
	rows, err := q.QueryContext(ctx, `SELECT `+approvalColumns+` FROM dispatch_approvals WHERE dispatch_id = ? ORDER BY seq`, r.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return err
		}
		r.Approvals = append(r.Approvals, *a)
		if a.State == ApprovalPending && !lifecycle.DispatchEnded(r.State) {
			r.Phase = PhaseAwaitingApproval
		}
	}
	return rows.Err()
}
