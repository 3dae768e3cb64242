// Package branch is what `agora dispatch patch --branch` and `agora orch patches --branch` and
// --combined share: a dispatch's or a run's patches gathered into commits (internal/gitbranch
// writes them) and what was made, or the conflict and how to go on, printed.
package branch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/gitbranch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/shellwords"
)

// Work is what becomes a branch: where, on which commit, and the changes in order.
type Work struct {
	repo, base string
	changes    []gitbranch.Change
	// dispatches pairs each change with its dispatch, for the report.
	dispatches []string
	// run and tasks name a run's branch and each change's task, for the conflict's advice
	// (empty for one dispatch).
	run   string
	tasks []string
}

// blobGetter reads hash-checked content from the blob store.
type blobGetter interface {
	Get(d digest.Digest, max int64) ([]byte, error)
}

// DispatchWork gathers one dispatch's branch: its patch on the commit it ran on, in its
// repository unless repo names another clone of it.
func DispatchWork(blobs blobGetter, r *dispatch.Record, repo string) (Work, error) {
	c, err := dispatchChange(blobs, r, "", "")
	if err != nil {
		return Work{}, err
	}
	w := Work{repo: r.Repo, base: r.Revision, changes: []gitbranch.Change{c}}
	if repo != "" {
		w.repo = repo
	}
	return w, w.check("dispatch " + r.ID)
}

// dispatchChange is the commit one dispatch's patch becomes. The author is the subagent and
// the version that wrote it; the message names the task, the dispatch and the run, as
// trailers a reviewer (or a script) can read back.
func dispatchChange(blobs blobGetter, r *dispatch.Record, task, run string) (gitbranch.Change, error) {
	label := "dispatch " + r.ID
	subject := "agora: dispatch " + r.ID
	if task != "" {
		label = fmt.Sprintf("task %s (dispatch %s)", task, r.ID)
		subject = fmt.Sprintf("agora: task %s of run %s", task, run)
	}
	msg := subject + "\n\n"
	if task != "" {
		msg += "Agora-Task: " + task + "\nAgora-Run: " + run + "\n"
	}
	msg += "Agora-Dispatch: " + r.ID + "\nAgora-Subagent: " + r.Subagent + "@" + string(r.SubagentDigest) + "\n"
	c := gitbranch.Change{
		Label:   label,
		Author:  gitbranch.Signature{Name: r.Subagent + "@" + string(r.SubagentDigest), Email: r.Subagent + "@subagent.agora.invalid"},
		Message: msg,
	}
	if r.Result != nil && r.Result.Patch != nil && r.Result.Patch.Size > 0 {
		b, err := blobs.Get(r.Result.Patch.Digest, 0)
		if err != nil {
			return c, fmt.Errorf("%s: %w", label, err)
		}
		c.Patch = b
	}
	return c, nil
}

// runOrder is the run's succeeded tasks in dependency order: each step takes, of the tasks
// whose dependencies are all placed, the one with the smallest id (the lexicographically
// first topological order). So the same run always gives the same branch, and a task's
// commit comes after the commits of everything it depends on.
func runOrder(tasks []api.Task) []api.Task {
	pending := slices.Clone(tasks)
	slices.SortFunc(pending, func(a, b api.Task) int { return strings.Compare(a.ID, b.ID) })
	known := map[string]bool{}
	for _, t := range tasks {
		known[t.ID] = true
	}
	placed := map[string]bool{}
	var order []api.Task
	for len(pending) > 0 {
		next := slices.IndexFunc(pending, func(t api.Task) bool {
			return !slices.ContainsFunc(t.DependsOn, func(d string) bool { return known[d] && !placed[d] })
		})
		if next < 0 { // a cycle, which the plan check refuses; keep id order
			next = 0
		}
		t := pending[next]
		pending = slices.Delete(pending, next, next+1)
		placed[t.ID] = true
		if t.State == lifecycle.TaskSucceeded && t.DispatchID != "" && !t.Judging() {
			order = append(order, t)
		}
	}
	return order
}

// RunWork gathers a run's branch: its tasks' patches in dependency order, on the run's commit
// in the run's repository, unless repo names another clone of it. The tasks in skip are left
// out; each must be one whose patch would be there.
func RunWork(ctx context.Context, h *home.Home, run api.Run, repo string, skip []string, includeLearn bool) (Work, error) {
	w := Work{repo: run.Repo, base: run.Revision, run: run.ID}
	if repo != "" {
		w.repo = repo
	}
	order := runOrder(run.Tasks)
	if err := checkSkip(run.ID, run.Tasks, order, skip); err != nil {
		return w, err
	}
	records := dispatch.NewRecords(h.DB, nil, nil)
	for _, t := range order {
		if slices.Contains(skip, t.ID) {
			continue
		}
		r, err := records.Get(ctx, t.ProductID()) // a fixed task's patch is its fix's
		if err != nil {
			return w, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if !includeLearn {
			// A learn dispatch ran under a grant nobody enforced (docs/learn.md).
			if err := dispatch.LearnRefusal(r, "a branch"); err != nil {
				return w, fmt.Errorf("task %s: %w", t.ID, err)
			}
		}
		w.base = cmp.Or(w.base, r.Revision)
		w.repo = cmp.Or(w.repo, r.Repo) // a workspace run: its repository, as the dispatcher resolved it
		if r.Revision != w.base {
			return w, fmt.Errorf("task %s ran on commit %s, the run on %s: one branch needs one base", t.ID, cmdutil.OrDash(r.Revision), w.base)
		}
		c, err := dispatchChange(h.Blobs, r, t.ID, run.ID)
		if err != nil {
			return w, err
		}
		w.changes, w.dispatches, w.tasks = append(w.changes, c), append(w.dispatches, r.ID), append(w.tasks, t.ID)
	}
	return w, w.check("run " + run.ID)
}

// checkSkip refuses a --skip that names no task whose patch the branch would take, and one
// that leaves out a task another task of the branch is stacked on: that one's patch was
// made on top of the skipped work.
func checkSkip(run string, tasks, order []api.Task, skip []string) error {
	for _, id := range skip {
		if !slices.ContainsFunc(order, func(t api.Task) bool { return t.ID == id }) {
			ids := make([]string, len(order))
			for i, t := range order {
				ids[i] = t.ID
			}
			return fmt.Errorf("--skip %q: run %s has no succeeded task %q whose work the branch takes; those are: %s", id, run, id, cmdutil.OrDash(strings.Join(ids, ", ")))
		}
	}
	if len(skip) == 0 {
		return nil
	}
	stackOf := RunStacks(tasks)
	for _, t := range order {
		if slices.Contains(skip, t.ID) {
			continue
		}
		for _, b := range stackOf(t) {
			if slices.Contains(skip, b) {
				return fmt.Errorf("--skip %q: task %s is stacked on its work (its patch was made on top of it); skip %s too, or keep %s",
					b, t.ID, t.ID, b)
			}
		}
	}
	return nil
}

// RunStacks returns the stack of a task of tasks: the tasks whose patches its own applies
// on top of, in order ([plan.StackOrder]); nil for a task that is not stacked.
func RunStacks(tasks []api.Task) func(api.Task) []string {
	var byID map[string]api.Task
	return func(t api.Task) []string {
		if len(t.Base) == 0 {
			return nil
		}
		if byID == nil {
			byID = make(map[string]api.Task, len(tasks))
			for _, x := range tasks {
				byID[x.ID] = x
			}
		}
		return plan.StackOrder(t.Base, func(id string) ([]string, bool) {
			x, ok := byID[id]
			return x.Base, ok
		})
	}
}

// check says what is missing before git is asked anything.
func (w Work) check(what string) error {
	switch {
	case w.base == "" && w.repo == "":
		return fmt.Errorf("%s did not work on a repository, so there is no commit to branch from; its patches are against an empty tree", what)
	case w.base == "":
		return fmt.Errorf("%s did not work on a repository, so there is no commit to branch from in %s", what, w.repo)
	case w.repo == "":
		return fmt.Errorf("%s ran on a workspace's commit %s; name a clone that has it with --repo PATH", what, w.base)
	}
	return nil
}

// Write makes the branch and prints what it made, or the conflict and how to go on.
func Write(ctx context.Context, f *cmdutil.Factory, w Work, branch string) error {
	res, err := gitbranch.Create(ctx, branch, gitbranch.Options{Repo: w.repo, Base: w.base, Changes: w.changes, When: f.Now()})
	var ce *gitbranch.ConflictError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s does not apply onto the changes before it; conflict in %s. Nothing was created. "+
			"To go on: review that patch against the others (agora dispatch patch ID), %s, "+
			"or print one patch of everything (--combined) and resolve it by hand",
			ce.Label, ce.Where(), without(w, ce.Label, branch))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "branch %s at %s: %s on %s\n", branch, short(res.Head), cmdutil.Plural(len(res.Commits), "commit"), short(w.base))
	for _, label := range res.Unchanged {
		fmt.Fprintf(f.IO.Out, "  no commit for %s: its patch changes nothing on top of the commits before it (the same edit)\n", label)
	}
	fmt.Fprintf(f.IO.Out, "  -> git log --stat %s..%s   (in %s; nothing was checked out or pushed)\n", short(w.base), branch, w.repo)
	return nil
}

// without is the advice to make the branch without the change labelled label: for a run,
// the exact command (its --skip TASK), each word quoted for a shell: a task id may hold a glob
// (fan[a]) and a branch name an operator (';', '$').
func without(w Work, label, branch string) string {
	for i, c := range w.changes {
		if c.Label == label && i < len(w.tasks) {
			return fmt.Sprintf("make the branch without it (agora orch patches %s --branch %s --skip %s)",
				shellwords.Quote(w.run), shellwords.Quote(branch), shellwords.Quote(w.tasks[i]))
		}
	}
	return "make the branch without it from the changes before it"
}

// WriteCombined prints one patch of every change, from the base to the result.
func WriteCombined(ctx context.Context, f *cmdutil.Factory, w Work) error {
	b, err := gitbranch.Combined(ctx, gitbranch.Options{Repo: w.repo, Base: w.base, Changes: w.changes})
	var ce *gitbranch.ConflictError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s does not apply onto the changes before it; conflict in %s: there is no one patch of them",
			ce.Label, ce.Where())
	}
	if err != nil {
		return err
	}
	_, err = f.IO.Out.Write(b)
	return err
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
