package dispatch

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The doors a question is answered through.
const (
	ViaCLI  = "cli"  // agora dispatch resume, by a person on the host
	ViaMCP  = "mcp"  // agora_dispatch {"resume": ...}, by an MCP client
	ViaOrch = "orch" // agora orch answer: the run fires the answering attempt
)

// The answer itself is recorded as the parent's lifecycle event dispatch.answered (actor: who
// answered), with the child's dispatch.accepted in the same transaction; a refused answer is
// entry.DispatchResumeRefused.

// Answerer is who answers a dispatch's question and through which door: the parent records
// the actor (answered_by), and its dispatch.answered entry (or, refused, its
// dispatch.resume.refused entry) records all of it.
type Answerer struct {
	Actor string // "mcp:CLIENT", the OS user, "USER via orch/RUN/TASK"
	Via   string // ViaCLI, ViaMCP or ViaOrch
	Role  string // an MCP client's ceiling ("dispatch", "orchestrate"); "" otherwise
	// RunID and TaskID are the run and task whose attempt answers (ViaOrch only).
	RunID, TaskID string
}

// answerNote travels from ResumeRequest through Accept to the transaction that records the
// answer: who answers, and the SHA-256 of the answer (the answer itself is in the child's
// input, never in the audit log).
type answerNote struct {
	by  Answerer
	sum string
}

// answerer is who the note names, or an answerer known only by the request's actor.
func (n *answerNote) answerer(actor string) Answerer {
	if n == nil {
		return Answerer{Actor: actor}
	}
	return n.by
}

// AnsweredError is an answer to a question that was already answered: it names the first.
type AnsweredError struct {
	Parent, By, Child string
	At                time.Time
}

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("dispatch %s was already answered by %s at %s: child %s; a question is answered once (see 'agora dispatch describe %s')",
		e.Parent, e.By, e.At.UTC().Format(time.RFC3339), e.Child, e.Child)
}

// answerStateError is an answer to a dispatch that is not waiting for one.
type answerStateError struct{ id, state string }

func (e *answerStateError) Error() string {
	return fmt.Sprintf("dispatch %s is %s; only a dispatch that needs input can be resumed", e.id, e.state)
}

// answerRefusal returns err's refusal of an answer (an [AnsweredError] or a parent that does
// not wait for one), or nil when err is something else.
func answerRefusal(err error) error {
	var ae *AnsweredError
	var se *answerStateError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &se):
		return se
	}
	return nil
}

// MCPHidden returns why an MCP client may not see r, or nil when it may: a dispatch on a
// repository path a person gave on the host's command line (agora dispatch run --repo, the
// attempts of agora orch submit --repo) is one no MCP client could have started, and its
// record, patch, outputs and logs are that repository's. The error names no path.
func MCPHidden(r *Record) error {
	if r.Repo != "" && r.Workspace == "" {
		return reqErr("dispatch %s works on a repository path given on the host's command line (agora dispatch run --repo, "+
			"agora orch submit --repo); over MCP only dispatches on a workspace, or on none, can be seen or answered", r.ID)
	}
	return nil
}

// MCPReadOnly returns why an MCP client may not answer or cancel r, or nil when it may: what
// [MCPHidden] refuses, and a run's attempt, which is answered or cancelled only through its run
// (agora orch answer, agora orch cancel on the host).
func MCPReadOnly(r *Record) error {
	if err := MCPHidden(r); err != nil {
		return err
	}
	if r.RunID != "" {
		return reqErr("dispatch %s is an attempt of task %q of run %s; answer or cancel it through the run, "+
			"on the host: %s, or %s", r.ID, r.TaskID, r.RunID, api.AnswerCommand(r.RunID, r.TaskID), api.CancelCommand(r.RunID, r.TaskID))
	}
	return nil
}

// mayAnswer returns why by may not answer parent, or nil. Over MCP only what the client could
// have dispatched itself; a run's attempt only by its own run; a person on the CLI anything
// but a run's attempt (answering it past the run would leave the run waiting).
func mayAnswer(parent *Record, by Answerer) error {
	switch by.Via {
	case ViaMCP:
		return MCPReadOnly(parent)
	case ViaOrch:
		if parent.RunID != "" && (parent.RunID != by.RunID || parent.TaskID != by.TaskID) {
			return reqErr("dispatch %s is an attempt of task %q of run %s, not of task %q of run %s", parent.ID, parent.TaskID, parent.RunID, by.TaskID, by.RunID)
		}
	default:
		if parent.RunID != "" {
			return reqErr("dispatch %s is an attempt of task %q of run %s; answer it through the run so the run goes on: %s",
				parent.ID, parent.TaskID, parent.RunID, api.AnswerCommand(parent.RunID, parent.TaskID))
		}
	}
	return nil
}

// refuseAnswer records that by's answer to parentID was refused (why, who, through which
// door), then returns the refusal as a [RequestError]. A refusal the audit log cannot record is
// still a refusal.
func (d *Dispatcher) refuseAnswer(ctx context.Context, parentID string, by Answerer, why error) error {
	details := map[string]any{"dispatch": parentID, entry.KeyBy: by.Actor, entry.KeyReason: why.Error()}
	if by.Via != "" {
		details[entry.KeyVia] = by.Via
	}
	if by.Role != "" {
		details["role"] = by.Role
	}
	err := d.Records.AppendAudit(ctx, audit.Entry{Actor: by.Actor, Kind: entry.DispatchResumeRefused, Subject: entry.Dispatch(parentID), Details: details})
	if err != nil {
		return fmt.Errorf("answer to dispatch %s refused (%v), and the audit log could not record the refusal: %w", parentID, why, err)
	}
	var re *RequestError
	if errors.As(why, &re) {
		return re
	}
	return &RequestError{Err: why}
}

// answered moves child's parent from needs_input to answered, naming child, inside tx (the
// transaction that records child). It refuses, with an [AnsweredError] naming the first
// answer, a parent that was answered already (or, recorded before answers were, has a child);
// the one exception is the parent's own run answering it again after the child it fired
// before ended (a retried task answers with the same answer).
func (s *Records) answered(ctx context.Context, tx *sql.Tx, child *Record) error {
	p, err := getRecord(ctx, s.prepared(tx), child.ParentID)
	if err != nil {
		return err
	}
	data := map[string]any{"child": child.ID, entry.KeyBy: child.Actor}
	switch p.State {
	case lifecycle.DispatchNeedsInput:
		var first, by, at string
		err := tx.QueryRowContext(ctx, `SELECT id, actor, created_at FROM dispatches WHERE parent_id = ? AND id != ? ORDER BY created_at LIMIT 1`,
			p.ID, child.ID).Scan(&first, &by, &at)
		if err == nil {
			t, _ := time.Parse(time.RFC3339Nano, at)
			return &AnsweredError{Parent: p.ID, By: by, At: t, Child: first}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	case lifecycle.DispatchAnswered:
		retry := child.RunID != "" && child.RunID == p.RunID && child.TaskID == p.TaskID
		var prevState string
		if retry {
			if err := tx.QueryRowContext(ctx, `SELECT state FROM dispatches WHERE id = ?`, p.ChildID).Scan(&prevState); err != nil {
				return err
			}
		}
		if !retry || !lifecycle.DispatchEnded(prevState) {
			at := time.Time{}
			if p.AnsweredAt != nil {
				at = *p.AnsweredAt
			}
			return &AnsweredError{Parent: p.ID, By: p.AnsweredBy, At: at, Child: p.ChildID}
		}
		data["retry_of"] = p.ChildID
	default:
		return &answerStateError{id: p.ID, state: p.State}
	}
	now := s.now().UTC()
	if _, err := tx.ExecContext(ctx, `UPDATE dispatches SET state = ?, child_id = ?, answered_by = ?, answered_at = ? WHERE id = ?`,
		lifecycle.DispatchAnswered, child.ID, child.Actor, ts(now), p.ID); err != nil {
		return err
	}
	if n := child.answer; n != nil {
		data[entry.KeyVia], data["role"], data["answer_sha256"] = n.by.Via, n.by.Role, n.sum
	}
	// The parent's entry, under the actor who answered it.
	by := *p
	by.Actor = child.Actor
	return s.event(ctx, tx, &by, lifecycle.DispatchAnswered, data)
}

// answerSum is the hex SHA-256 of an answer, as the audit log records it.
func answerSum(answer string) string {
	sum := sha256.Sum256([]byte(answer))
	return hex.EncodeToString(sum[:])
}
