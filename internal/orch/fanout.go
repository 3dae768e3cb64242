package orch

import (
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// Fan-out: a fan-out task F is a group. Its producer's attempt reads the list (the executor
// reads the output file the host collected, see [Attempt.Lists]); when the producer succeeds,
// the engine adds F[KEY] for every item in the same transaction, each a dependency of F, so
// F becomes done when its last item succeeds, and is skipped (naming the item) when one
// fails for good, like any dependent.

// ItemList is a fan-out list as the executor read it: its items, or why it cannot be used.
type ItemList struct {
	Items []Item
	Err   string // "" when Items is the list
}

// listPath is the path in its producer's outputs of fan-out f's list.
func listPath(f *task) string {
	return strings.TrimPrefix(f.spec.FanOut.Select, plan.SelectOutputPrefix)
}

// lists are the output paths t's attempt must read as fan-out lists.
func (t *task) lists() []string {
	var out []string
	for _, f := range t.fanOuts {
		if p := listPath(f); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// fanOut adds the items of every fan-out whose list t, which just succeeded, wrote. A
// fan-out whose list cannot be used fails with the reason, and its dependents are skipped.
//
// A skipped fan-out gets its items too: its list is read now or never, and the fan-out may
// be taken back later (an `orch retry` of t whose unskip has not reached it yet, or of a
// template dependency). An item that a dead dependency holds (the template's, which the
// fan-out shares) is skipped at once, naming the task that dependency leads back to; the
// others wait or run as any item does.
func (e *Engine) fanOut(t *task, o Outcome) {
	for _, f := range t.fanOuts {
		if (f.state != lifecycle.TaskPending && f.state != lifecycle.TaskSkipped) || f.extended {
			continue // ended meanwhile, or added already
		}
		path := listPath(f)
		list, ok := o.Items[path]
		switch {
		case !ok:
			e.fanOutFailed(f, "the executor read no list "+path)
			continue
		case list.Err != "":
			e.fanOutFailed(f, "task "+t.spec.ID+"'s output "+path+": "+list.Err)
			continue
		}
		added, err := e.extend(t.run, f, fanOutRow(f, o.DispatchID, list.Items), o.DispatchID)
		if err != nil {
			e.fanOutFailed(f, "task "+t.spec.ID+"'s output "+path+": "+err.Error())
			continue
		}
		if len(added) == 0 {
			f.own().extended = true // an empty list: the fan-out is done with its producer
		}
		held := map[*task]bool{}
		eachHeld(added, func(c, root *task) {
			held[c] = true
			e.skip(cascade{root: root, state: root.state, stack: []*task{c}})
		})
		for _, c := range added {
			if c.unmet == 0 && !held[c] {
				e.becomeReady(c)
			}
		}
	}
}

// fanOutFailed ends fan-out f failed: its list could not be used.
func (e *Engine) fanOutFailed(f *task, detail string) {
	f.setReason(lifecycle.ReasonFanOutRefused, detail)
	e.set(f, lifecycle.TaskFailed)
	e.record(f.run, f, entry.TaskFailed, map[string]any{entry.KeyReason: f.reason, entry.KeyDetail: detail})
	e.skipDependents(f, lifecycle.TaskFailed)
}

// groupDone ends fan-out f succeeded: every item succeeded.
func (e *Engine) groupDone(f *task) {
	e.set(f, lifecycle.TaskSucceeded)
	e.record(f.run, f, entry.TaskSucceeded, map[string]any{"items": int64(len(f.children))})
	e.release(f)
}

// groupInputs are the inputs a need of every item of fan-out f stands for: each item's
// product under <key>/<KEY>/.
func groupInputs(key string, n plan.Need, f *task) []Input {
	out := make([]Input, len(f.children))
	for i, c := range f.children {
		out[i] = Input{Key: key, Dir: c.key, FromTask: c.spec.ID, FromDispatch: c.productID(), Select: n.Select}
	}
	return out
}

// MaxAttemptInputs caps the products one attempt receives: a dispatch mounts at most 1,024
// input files, and the attempt's fired entry lists every input.
const MaxAttemptInputs = 1024

// inputCount is how many products t's attempt would receive.
func (t *task) inputCount() int {
	n := 0
	for _, need := range t.spec.Needs {
		if up := t.run.task(need.From); up.spec.FanOut != nil {
			n += len(up.children)
		} else {
			n++
		}
	}
	return n
}

// failUnfired ends ready task t failed without firing it.
func (e *Engine) failUnfired(t *task, reason, detail string) {
	unqueue(t)
	t.setReason(reason, detail)
	e.set(t, lifecycle.TaskFailed)
	e.record(t.run, t, entry.TaskFailed, map[string]any{entry.KeyAttempt: int64(t.attempts), entry.KeyReason: reason, entry.KeyDetail: detail})
	e.skipDependents(t, lifecycle.TaskFailed)
	if t.role != "" {
		e.ownedEnded(t)
	}
	e.settle(t.run)
}
