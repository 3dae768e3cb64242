package plan

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
)

// Refs looks up catalog references. Each method returns nil when the reference resolves, and
// otherwise an error whose text names the problem for a person, such as
// `subagent "x" not found; known: a, b` (registry's NotFoundError reads that way).
type Refs interface {
	Subagent(ctx context.Context, ref string) error // NAME or NAME@sha256:HEX
	Env(ctx context.Context, ref string) error      // NAME or NAME@sha256:HEX
	Target(ctx context.Context, name string) error  // a target of agora.yaml; never called with ""
	// Workspace checks the plan's workspace (NAME or NAME@sha256:HEX) and that it allows
	// revision ("": its default) and the revision names a commit of it; never called with
	// ref "". Its error names the workspace and its allowed revisions, never a path.
	Workspace(ctx context.Context, ref, revision string) error
	// Queue checks that agora.yaml declares the queue (never called with ""); its error names
	// the queues it does declare.
	Queue(ctx context.Context, name string) error
	// Reviewer checks that subagent ref resolves and may review a task's work on target (the
	// task's, "" for agora.yaml's default target): a review is the reviewer's final answer as
	// its worker takes it from the model, which an exec command has none of, and which a CLI
	// runtime gives only where its tools cannot reach the CLI. Its error teaches why.
	Reviewer(ctx context.Context, ref, target string) error
}

// SubagentPinner is what [Refs] implement that can name the version a subagent reference
// names now: NAME@sha256:HEX. A run pins its plan's bare names with it at submit.
type SubagentPinner interface {
	PinSubagent(ctx context.Context, ref string) (string, error)
}

// CurrentChecker is what [Refs] implement that can hold a reference to the catalog as people
// registered it now (docs/adr/0025): Current refuses ref (NAME@sha256:HEX) unless it names
// its name's current version, a retired name's as not found. A submission starts new work, so
// it checks every version the plan pins with it; a run's tasks later keep what was pinned.
type CurrentChecker interface {
	Current(ctx context.Context, kind catalog.Kind, ref string) error
}

// SubagentRefs lists every subagent reference of the plan written without a version (a
// bare NAME: its tasks', its fan-out templates', its reviewers' and its fixers'), sorted,
// each once: what a run pins at submit.
func (p *Plan) SubagentRefs() []string {
	seen := map[string]bool{}
	add := func(ref string) {
		if ref != "" && !strings.Contains(ref, "@") {
			seen[ref] = true
		}
	}
	var task func(t *Task)
	task = func(t *Task) {
		if t.FanOut() != nil {
			task(&t.FanOut().Template)
			return
		}
		add(t.Subagent)
		if r := t.Review(); r != nil {
			for _, s := range r.Subagents {
				add(s)
			}
		}
		if f := t.OnFail(); f != nil && f.Fix != nil {
			add(f.Fix.Subagent)
		}
	}
	for i := range p.Tasks {
		task(&p.Tasks[i])
	}
	return slices.Sorted(maps.Keys(seen))
}

// Check looks up every catalog reference of the plan (subagents, env bundles, targets, the
// workspace and its revision) through
// refs (and the plan's queue against agora.yaml's) and reports each one that does not resolve, at every place it is used, as
// [strictyaml.Errors] (tasks[1].subagent: subagent "x" not found; known: a, b). Each distinct
// reference is looked up once. A nil refs checks nothing: validating a plan offline without a
// catalog checks structure only.
func (p *Plan) Check(ctx context.Context, refs Refs) error {
	if refs == nil {
		return nil
	}
	v := newValidator(p.pos, nil)
	p.checkRefs(ctx, refs, v)
	return v.result()
}

// checkRefs adds to v every reference that does not resolve, except at a path v has a
// problem at already.
func (p *Plan) checkRefs(ctx context.Context, refs Refs, v *validator) {
	had := map[string]bool{}
	for _, e := range v.errs {
		had[e.Path] = true
	}
	c := refChecker{ctx: ctx, v: v, seen: map[refKey]error{}, had: had}
	if p.Workspace != "" && !c.had["revision"] && !c.v.reported("revision") {
		c.check("workspace", "workspace", p.Workspace, func(ctx context.Context, ref string) error {
			return refs.Workspace(ctx, ref, p.Revision)
		})
	}
	c.check("queue", "queue", p.QueueName(), refs.Queue)
	c.check("defaults.target", "target", p.Defaults.Target, refs.Target)
	for k, e := range p.Defaults.Env {
		c.check("defaults.env["+strconv.Itoa(k)+"]", "env", e, refs.Env)
	}
	for i := range p.Tasks {
		c.task("tasks["+strconv.Itoa(i)+"]", &p.Tasks[i], refs, p.Defaults.Target)
	}
}

// task checks the references of t at path tp: its own, its fan-out template's, its
// reviewers' (on t's target, else defaultTarget) and its fixer's. A fix's work is reviewed by
// t's reviewers on t's target, so they are checked here too.
func (c *refChecker) task(tp string, t *Task, refs Refs, defaultTarget string) {
	if t.FanOut() != nil {
		c.task(tp+".fan_out.template", &t.FanOut().Template, refs, defaultTarget)
		return
	}
	c.check(tp+".subagent", "subagent", t.Subagent, refs.Subagent)
	c.check(tp+".target", "target", t.Target, refs.Target)
	for k, e := range t.Env {
		c.check(tp+".env["+strconv.Itoa(k)+"]", "env", e, refs.Env)
	}
	if r := t.Review(); r != nil {
		target := cmp.Or(t.Target, defaultTarget)
		for k, s := range r.Subagents {
			c.check(tp+".review.subagents["+strconv.Itoa(k)+"]", "reviewer on target "+target, s, func(ctx context.Context, ref string) error {
				return refs.Reviewer(ctx, ref, target)
			})
		}
	}
	if f := t.OnFail(); f != nil && f.Fix != nil {
		c.check(tp+".on_fail.fix.subagent", "subagent", f.Fix.Subagent, refs.Subagent)
	}
}

type refKey struct{ kind, ref string }

// refChecker lives for one Check call, so it carries that call's ctx to each lookup.
type refChecker struct {
	ctx  context.Context
	v    *validator
	seen map[refKey]error
	had  map[string]bool // paths with a structural problem: not looked up
}

func (c *refChecker) check(path, kind, ref string, lookup func(context.Context, string) error) {
	if ref == "" || c.had[path] || c.v.reported(path) {
		return
	}
	k := refKey{kind, ref}
	err, ok := c.seen[k]
	if !ok {
		err = lookup(c.ctx, ref)
		c.seen[k] = err
	}
	if err != nil {
		c.v.add(path, "%v", err)
	}
}
