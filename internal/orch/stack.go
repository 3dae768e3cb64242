package orch

import "github.com/agora-dev/agora/internal/orch/plan"

// Stacked tasks: a task with base starts from its bases' approved work (docs/plan.md,
// "Stacked tasks"). The engine names the patches, in the order they apply; the dispatch
// applies them to the run's commit on the host before its sandbox starts, and fails
// stack-conflict, its agent never run, when one does not apply.

// stackInputs are the patches t's workspace starts from ([plan.StackOrder]): each base
// task's approved product (the fix its loop succeeded with, else its attempt), under
// plan.StackKey in a directory named for the task. A fix or a reviewer of a stacked task
// has its Base, so it works on the same stack.
func stackInputs(t *task) []Input {
	r := t.run
	ids := plan.StackOrder(t.spec.Base, func(id string) ([]string, bool) {
		up := r.task(id)
		if up == nil {
			return nil, false
		}
		return up.spec.Base, true
	})
	var out []Input
	for _, id := range ids {
		out = append(out, Input{Key: plan.StackKey, Dir: id, FromTask: id, FromDispatch: r.task(id).productID(),
			Select: plan.SelectPatch, Stack: true})
	}
	return out
}
