package plan

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
)

// Run extension: a plan may name tasks the engine adds to a running run. A fan_out task adds
// one task per item a producer listed; a review adds one task per reviewer once the task's
// work is done; on_fail adds fix tasks when that work is judged red. The added tasks' ids are
// derived from the task that caused them ([ItemID], [ReviewID], [FixID]); declared ids never
// hold '.', '[' or ']', so an added id never collides with a declared one.

// Limits of run extension.
const (
	MaxFanOutItems = 10_000 // items one fan-out list may hold
	MaxReviewers   = 9      // subagents in one review
	MaxFixAttempts = 10     // the largest on_fail.fix.max_attempts
)

// FanOut adds one task per item of a list another task leaves: when From succeeds, the file
// Select names in its outputs is read as a JSON list, and task ITEMID (see [ItemID]) runs the
// template with the item under "item" in its input. The fan-out task succeeds when every item
// task has; needs from it hand over every item task's product, under <key>/<KEY>/.
type FanOut struct {
	From     string // the producer's task id
	Select   string // output:PATH, the list in the producer's outputs
	Template Task   // every item task's settings; its ID is ""
}

// Review is a review quorum: once the task's work is done (and its verify gate green), each
// of Subagents (a model runtime's) reviews its patch and answers its review as its final
// answer; the work is approved when at least Approve of them approve.
type Review struct {
	Subagents []string // NAME or NAME@sha256:HEX, distinct names, 1 to MaxReviewers
	Approve   int      // 1 to len(Subagents)
}

// OnFail is what happens when a task's work is judged red (its verify gate, or its review).
type OnFail struct {
	Fix *Fix
}

// Fix is a fix loop: a red verdict adds task ID.fix-N, a dispatch of Subagent that starts
// from the red patch, until one is green or MaxAttempts fixes were tried.
type Fix struct {
	Subagent    string
	MaxAttempts int // 1 to MaxFixAttempts
}

// ItemID is the id of fan-out task id's item with key key: "id[key]".
func ItemID(id, key string) string { return id + "[" + key + "]" }

// FixID is the id of task id's n-th fix: "id.fix-n".
func FixID(id string, n int) string { return id + ".fix-" + strconv.Itoa(n) }

// ReviewID is the id of the review of task id's work by subagent ref: "id.review-NAME".
func ReviewID(id, ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	return id + ".review-" + name
}

// ValidItemKey reports whether key may name a fan-out item: it is what a task id may be, so
// an item's id never holds '[', ']', '.', '/' or anything else an id is built with.
func ValidItemKey(key string) bool { return taskIDPattern().MatchString(key) }

type fanOutDoc struct {
	From     string       `yaml:"from"`
	Select   string       `yaml:"select"`
	Template *templateDoc `yaml:"template"`
}

// templateDoc is a task without an id and without fan_out: TestTemplateDoc keeps its fields
// those of taskDoc.
type templateDoc struct {
	Subagent  string             `yaml:"subagent"`
	Target    string             `yaml:"target"`
	Env       []string           `yaml:"env"`
	Input     any                `yaml:"input"`
	DependsOn []string           `yaml:"depends_on"`
	Base      []string           `yaml:"base"`
	Needs     map[string]needDoc `yaml:"needs"`
	Locks     []lockDoc          `yaml:"locks"`
	Retry     *retryDoc          `yaml:"retry"`
	Timeout   *time.Duration     `yaml:"timeout"`
	Grants    *grant.Set         `yaml:"grants"`
	Budget    *budget.Budget     `yaml:"budget"`
	Review    *reviewDoc         `yaml:"review"`
	OnFail    *onFailDoc         `yaml:"on_fail"`
	Verify    *verifyDoc         `yaml:"verify"`
}

func (d *templateDoc) task() taskDoc {
	return taskDoc{Subagent: d.Subagent, Target: d.Target, Env: d.Env, Input: d.Input, DependsOn: d.DependsOn, Base: d.Base, Needs: d.Needs,
		Locks: d.Locks, Retry: d.Retry, Timeout: d.Timeout, Grants: d.Grants, Budget: d.Budget, Review: d.Review, OnFail: d.OnFail,
		Verify: d.Verify}
}

type reviewDoc struct {
	Subagents []string `yaml:"subagents"`
	Approve   *int     `yaml:"approve"`
}

type onFailDoc struct {
	Fix *fixDoc `yaml:"fix"`
}

type fixDoc struct {
	Subagent    string `yaml:"subagent"`
	MaxAttempts *int   `yaml:"max_attempts"`
}

// fanOutTask checks a fan_out task: nothing but its id and fan_out, a producer, an
// output:PATH select and a template, which is checked as a task of the same id (its
// dependencies are the fan-out task's, so a cycle through the template is found).
func (v *validator) fanOutTask(t *Task, doc *taskDoc, tp string, ids map[string]int, g *graph, defaultRetry *Retry) {
	for _, f := range doc.setFields() {
		v.add(tp+"."+f, "a fan_out task runs nothing itself: move %s into fan_out.template", f)
	}
	fp := tp + ".fan_out"
	fo := doc.FanOut
	v.edge(fp+".from", t.ID, fo.From, ids, g)
	switch {
	case fo.Select == "":
		v.add(fp+".select", "required; want %sPATH, the file of the list in %s's outputs", SelectOutputPrefix, orTask(fo.From))
	case !strings.HasPrefix(fo.Select, SelectOutputPrefix):
		v.add(fp+".select", "want %sPATH (a JSON list in the producer's outputs), got %q", SelectOutputPrefix, fo.Select)
	default:
		if err := CheckSelect(fo.Select); err != nil {
			v.add(fp+".select", "%v", err)
		}
	}
	t.rare().FanOut = &FanOut{From: fo.From, Select: fo.Select}
	if fo.Template == nil {
		v.add(fp+".template", "required; the settings of every item's task: {subagent, input, ...}")
		return
	}
	td := fo.Template.task()
	t.FanOut().Template.ID = t.ID // the template's dependencies are t's: it may not need t itself
	v.task(&t.FanOut().Template, &td, fp+".template", ids, g, defaultRetry)
	t.FanOut().Template.ID = ""
}

func orTask(id string) string {
	if id == "" {
		return "the producer"
	}
	return strconv.Quote(id)
}

// setFields names the fields of a fan_out task that only its template may set.
func (d *taskDoc) setFields() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"subagent", d.Subagent != ""}, {"target", d.Target != ""}, {"env", d.Env != nil}, {"input", d.Input != nil},
		{"depends_on", d.DependsOn != nil}, {"base", d.Base != nil}, {"needs", d.Needs != nil}, {"locks", d.Locks != nil}, {"retry", d.Retry != nil},
		{"timeout", d.Timeout != nil}, {"grants", d.Grants != nil}, {"budget", d.Budget != nil}, {"review", d.Review != nil},
		{"on_fail", d.OnFail != nil}, {"verify", d.Verify != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// review checks a review quorum: 1 to MaxReviewers subagents, distinct by name, and an
// approval threshold they can reach.
func (v *validator) review(path string, doc *reviewDoc) *Review {
	if doc == nil {
		return nil
	}
	r := &Review{Subagents: doc.Subagents}
	switch n := len(doc.Subagents); {
	case n == 0:
		v.add(path+".subagents", "required; 1 to %d reviewer subagents", MaxReviewers)
	case n > MaxReviewers:
		v.add(path+".subagents", "%d reviewers; at most %d", n, MaxReviewers)
	default:
		seen := map[string]int{}
		for i, ref := range doc.Subagents {
			ip := path + ".subagents[" + strconv.Itoa(i) + "]"
			if err := checkRef(catalog.KindSubagent, ref); err != nil {
				v.add(ip, "%v", err)
				continue
			}
			name, _, _ := strings.Cut(ref, "@")
			if first, dup := seen[name]; dup {
				v.add(ip, "reviewer %q listed twice (first at subagents[%d]): each reviewer's task is named for it", name, first)
				continue
			}
			seen[name] = i
		}
	}
	switch a := doc.Approve; {
	case a == nil:
		v.add(path+".approve", "required; how many of the %d reviewers must approve", len(doc.Subagents))
	case *a < 1 || (*a > len(doc.Subagents) && len(doc.Subagents) > 0):
		v.add(path+".approve", "want 1 to %d (the number of reviewers), got %d", max(len(doc.Subagents), 1), *a)
	default:
		r.Approve = *a
	}
	return r
}

// onFail checks a fix loop.
func (v *validator) onFail(path string, doc *onFailDoc) *OnFail {
	if doc == nil {
		return nil
	}
	if doc.Fix == nil {
		v.add(path+".fix", "required; {subagent: FIXER, max_attempts: N}")
		return nil
	}
	f := &Fix{Subagent: doc.Fix.Subagent, MaxAttempts: 1}
	fp := path + ".fix"
	if f.Subagent == "" {
		v.add(fp+".subagent", "required; the subagent that fixes red work")
	} else if err := checkRef(catalog.KindSubagent, f.Subagent); err != nil {
		v.add(fp+".subagent", "%v", err)
	}
	if m := doc.Fix.MaxAttempts; m != nil {
		if *m < 1 || *m > MaxFixAttempts {
			v.add(fp+".max_attempts", "want 1 to %d, got %d", MaxFixAttempts, *m)
		}
		f.MaxAttempts = *m
	}
	return &OnFail{Fix: f}
}

// extensions checks what needs the whole plan: a fan-out's producer is no fan-out itself, a
// template's budget narrows the plan's, and on_fail has a gate that can be red.
func (v *validator) extensions(p *Plan, doc *planDoc) {
	groups := map[string]bool{}
	for i := range p.Tasks {
		if p.Tasks[i].FanOut() != nil {
			groups[p.Tasks[i].ID] = true
		}
	}
	v.stackDepths(p)
	for i := range p.Tasks {
		t := &p.Tasks[i]
		tp := "tasks[" + strconv.Itoa(i) + "]"
		v.gate(tp, t, p.Defaults.Verify != nil)
		v.verifyNeeds(tp, t, p)
		v.stackBases(tp, t, groups)
		if fo := t.FanOut(); fo != nil {
			v.verifyNeeds(tp+".fan_out.template", &fo.Template, p)
			v.stackBases(tp+".fan_out.template", &fo.Template, groups)
		}
		fo := t.FanOut()
		if fo == nil {
			continue
		}
		if groups[fo.From] {
			v.add(tp+".fan_out.from", "task %q is a fan_out task and leaves no list: name the task that writes it", fo.From)
		}
		if j, ok := index(p.Tasks, fo.From); ok && (p.Tasks[j].Review() != nil || p.Tasks[j].OnFail() != nil) {
			v.add(tp+".fan_out.from", "task %q has a review or on_fail: a fan-out's list is read when its producer's attempt ends, so its producer cannot wait for a judgment", fo.From)
		}
		if in := fo.Template.Input; in != nil && bytes.Contains(in, []byte(`"item":`)) && hasItemKey(in) {
			v.add(tp+".fan_out.template.input.item", "set by the fan-out: each item's task gets its item here")
		}
		v.gate(tp+".fan_out.template", &fo.Template, p.Defaults.Verify != nil)
		if i < len(doc.Tasks) && doc.Tasks[i] != nil && doc.Tasks[i].FanOut != nil && doc.Tasks[i].FanOut.Template != nil {
			if b := doc.Tasks[i].FanOut.Template.Budget; b != nil {
				bp := tp + ".fan_out.template.budget"
				if _, err := budget.Narrow(*b, budget.Ceiling{Source: "plan " + strconv.Quote(p.Name), Budget: p.Budget}); err != nil {
					v.add(bp, "%v", err)
				} else {
					fo.Template.rare().Budget = *b
				}
			}
		}
	}
}

// gate refuses an on_fail with nothing that can judge the task's work red: a verify gate
// (its own or defaults.verify) or a review.
func (v *validator) gate(tp string, t *Task, defaultVerify bool) {
	if t.OnFail() != nil && t.Review() == nil && t.Verify() == nil && !defaultVerify {
		v.add(tp+".on_fail", "a fix loop needs a gate that can be red: give the task a verify gate or a review")
	}
}

// ResolvedFanOut is a fan-out with its template's defaults applied.
type ResolvedFanOut struct {
	From, Select string
	Template     Resolved // ID ""
}

// resolveFanOut is fan-out task t resolved: it depends on its producer and on whatever its
// template's tasks will depend on, so it is never done before they could be.
func (p *Plan) resolveFanOut(t *Task, base *Retry, env []string, l *lists) Resolved {
	tmpl := p.resolveTask(&t.FanOut().Template, base, env, l)
	d := append([]string{t.FanOut().From}, tmpl.Deps...)
	slices.Sort(d)
	// Retry is never used (the task fires nothing) but is set, as every resolved task's is.
	return Resolved{ID: t.ID, Env: []string{}, Deps: slices.Compact(d), Retry: base,
		Rare: &Rare{FanOut: &ResolvedFanOut{From: t.FanOut().From, Select: t.FanOut().Select, Template: tmpl}}}
}

// fanOut, review and onFail write the run-extension blocks; a plan without them writes
// nothing, so its canonical bytes (and digest) are those it had before they existed.
func (w *canonWriter) fanOut(f *FanOut) {
	o := w.object()
	o.key("from")
	w.str(f.From)
	o.key("select")
	w.str(f.Select)
	o.key("template")
	w.task(&f.Template)
	o.end()
}

func (w *canonWriter) review(r *Review) {
	o := w.object()
	o.key("approve")
	w.int(int64(r.Approve))
	o.key("subagents")
	w.strs(r.Subagents)
	o.end()
}

func (w *canonWriter) onFail(f *OnFail) {
	o := w.object()
	o.key("fix")
	fo := w.object()
	fo.key("max_attempts")
	w.int(int64(f.Fix.MaxAttempts))
	fo.key("subagent")
	w.str(f.Fix.Subagent)
	fo.end()
	o.end()
}

// index is the position of task id in tasks.
func index(tasks []Task, id string) (int, bool) {
	for i := range tasks {
		if tasks[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

// hasItemKey reports whether the canonical input object in has a top-level "item".
func hasItemKey(in []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil {
		return false
	}
	_, ok := m["item"]
	return ok
}

// verifyNeeds refuses a need of select verify from a task without a verify gate: it would
// have no verdict to hand over.
func (v *validator) verifyNeeds(tp string, t *Task, p *Plan) {
	for _, key := range slices.Sorted(maps.Keys(t.Needs())) {
		n := t.Needs()[key]
		if n.Select != SelectVerify {
			continue
		}
		j, ok := index(p.Tasks, n.From)
		if !ok {
			continue // reported as an unknown task
		}
		up := &p.Tasks[j]
		if up.FanOut() != nil {
			up = &up.FanOut().Template
		}
		if up.Verify() == nil && p.Defaults.Verify == nil {
			v.add(tp+".needs."+key+".select", "task %q has no verify gate, so no verdict to hand over", n.From)
		}
	}
}
