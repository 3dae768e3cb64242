package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/shellwords"
)

// Learn mode (docs/learn.md): a dispatch a person starts with --learn, a plan task's learn:
// true or on a target in mode: learn records what its grant would refuse (*.would_deny)
// instead of refusing it. What stays refused: everything outside the sandbox, every host
// outside egress.learn_hosts, secrets (placeholders), budgets and resource limits.

// ErrLearnFromMCP is wrapped by the refusal of a learn dispatch an MCP client asked for.
var ErrLearnFromMCP = errors.New("an MCP client cannot start a learn dispatch")

// learnMode says whether req is a learn dispatch on a target of mode targetMode, and refuses
// one a caller that may not learn (req.NoLearn) would start.
func learnMode(req Request, targetMode string) (bool, error) {
	learn := req.Learn || targetMode == config.ModeLearn
	if !learn || !req.NoLearn {
		return learn, nil
	}
	if targetMode == config.ModeLearn {
		return false, &RequestError{Err: fmt.Errorf("target %q is in learn mode (mode: learn in agora.yaml), which a person chose for it, not for an AI: %w; dispatch to another target, or ask a person to run `agora dispatch run --learn`", req.Target, ErrLearnFromMCP)}
	}
	return false, &RequestError{Err: fmt.Errorf("%w: learn mode is a person's decision (`agora dispatch run --learn`)", ErrLearnFromMCP)}
}

// learnRules are egress.learn_hosts, parsed; an entry that does not parse is an error naming
// it (Accept refuses a learn dispatch then).
func (d *Dispatcher) learnRules() ([]grant.EgressRule, error) {
	if d.Config == nil {
		return nil, nil
	}
	out := make([]grant.EgressRule, 0, len(d.Config.Egress.LearnHosts))
	for i, s := range d.Config.Egress.LearnHosts {
		r, err := grant.ParseEgressRule(s)
		if err != nil {
			return nil, fmt.Errorf("agora.yaml egress.learn_hosts[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// learnHosts are the learn hosts of a learn dispatch already accepted (its rules parsed
// then); none when they no longer parse: fail closed.
func (d *Dispatcher) learnHosts(r *Record) []grant.EgressRule {
	if !r.Learn {
		return nil
	}
	rules, err := d.learnRules()
	if err != nil {
		return nil
	}
	return rules
}

// commandWouldDeny is the tool.would_deny entry's details for an exec command the grant does
// not allow, recorded at accept instead of the refusal.
func commandWouldDeny(argv []string, reason string) map[string]any {
	// Each word quoted, so the line reads back (shellwords.Split) as exactly argv.
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = shellwords.Quote(w)
	}
	cmd := strings.Join(q, " ")
	d := map[string]any{entry.KeyTool: "exec", entry.KeyReason: reason}
	if len(cmd) > entry.MaxWouldDenyCommand {
		cmd = strings.ToValidUTF8(cmd[:entry.MaxWouldDenyCommand], "?")
		d[entry.KeyTruncated] = true
	}
	d[entry.KeyCommand] = cmd
	return d
}

// LearnRefusal is the refusal of a learn dispatch's product where it would feed other work
// (a plan hand-off, a branch) without the person's --include-learn, or nil.
func LearnRefusal(r *Record, where string) error {
	if r == nil || !r.Learn {
		return nil
	}
	return fmt.Errorf("dispatch %s is a learn dispatch (its grant's refusals were recorded, not enforced): its patch does not feed %s; pass --include-learn to take it anyway", r.ID, where)
}

// handOffRefusal is LearnRefusal for a dispatch's input: a plan cannot pass the flag, so it
// says where a person can.
func handOffRefusal(r *Record) error {
	if r == nil || !r.Learn {
		return nil
	}
	return fmt.Errorf("dispatch %s is a learn dispatch (its grant's refusals were recorded, not enforced): its products do not feed a hand-off; "+
		"a person may take its patch with `agora dispatch patch %s --branch NAME --include-learn`, or run the task again without learn", r.ID, r.ID)
}

// ProductRefusal is the refusal of a learn dispatch's product that a plan's engine reads
// itself (a fan-out's list, a reviewer's verdict), or nil: like a hand-off, a plan cannot
// pass --include-learn, so such a product never expands a run or judges work.
func ProductRefusal(r *Record, where string) error {
	if r == nil || !r.Learn {
		return nil
	}
	return fmt.Errorf("dispatch %s is a learn dispatch (its grant's refusals were recorded, not enforced): its products do not feed %s; run the task again on a target not in mode: learn", r.ID, where)
}

// LearnInRun returns the ids of run runID's learn dispatches, so a reader of the run (`agora
// orch status`) marks each task whose dispatch was one, a target's mode: learn included,
// with one query however many tasks the run has (a search of dispatches_learn_run).
func (s *Records) LearnInRun(ctx context.Context, runID string) (map[string]bool, error) {
	rows, err := s.db.SQL().QueryContext(ctx, `SELECT id FROM dispatches WHERE run_id = ? AND learn = 1`, runID)
	if err != nil {
		return nil, fmt.Errorf("read the learn dispatches of run %s: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}
