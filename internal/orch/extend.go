package orch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Run extension: the engine adds tasks to a live run when an event of the run calls for
// them (a producer's list, a task's work to review, a red verdict to fix). The tasks are
// added in memory and in the SAME batch transaction as that event, with one
// orch.run.extended entry; the run_extensions row keeps what they are derived from, so a
// restart (or a status read) derives exactly the same tasks again. Their ids are derived too
// (plan.ItemID, ReviewID, FixID): an extension whose first id is present was applied, and is
// never applied twice.

// Causes of an extension: the role of the tasks it adds.
const (
	causeFanOut = "fan_out"
	causeReview = "review"
	causeFix    = "fix"
)

// MaxRunTasks caps a run's tasks, the plan's and the added ones together.
const MaxRunTasks = 200_000

// ext is what run extension keeps on a task; every field is derived again at load.
type ext struct {
	role      string  // "" for a plan task, else the cause that added it
	by        *task   // the task the extension was for: the fan-out, the reviewed task, the loop's task
	key       string  // an item's key
	fanOuts   []*task // the fan-out tasks whose list this task writes
	extended  bool    // a fan-out task whose items were added
	children  []*task // a fan-out task's items
	reviewers []*task // the reviewers of this task's work
	fixes     []*task // a loop task's fixes, oldest first
	product   *task   // the fix a loop task succeeded with
	vote      *Review // a reviewer's review, once it succeeded
}

// noExt is the links of every task that has none: a plan's tasks share it until one gets
// links of its own (own), so a task without them pays a pointer, not the whole ext. It is
// never written (TestMain checks it is still empty after every test).
var noExt = &ext{}

// own is t's extension links to write: its own, made from noExt the first time.
func (t *task) own() *ext {
	if t.ext == noExt {
		t.ext = &ext{}
	}
	return t.ext
}

// extRow is one extension as run_extensions keeps it.
type extRow struct {
	Seq   int
	Cause string
	Task  string // the task it was for
	Data  []byte // canonical JSON: what the added tasks derive from (fanOutData, reviewData, fixData)
}

type itemData struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type fanOutData struct {
	FromDispatch string     `json:"from_dispatch"`
	Items        []itemData `json:"items"`
}

type reviewData struct {
	FromDispatch string `json:"from_dispatch"`
}

type fixData struct {
	N            int      `json:"n"`
	From         string   `json:"from"` // the rejected task: the loop's task or its last fix
	FromDispatch string   `json:"from_dispatch"`
	Reasons      []string `json:"reasons"`
}

// maxExtData caps what one extension row may hold when read back.
const maxExtData = 2*MaxItemsBytes + 1<<20

// fanOutRow is the extension of fan-out f with items, listed by from's attempt dispatchID.
func fanOutRow(f *task, dispatchID string, items []Item) extRow {
	var b bytes.Buffer
	b.WriteString(`{"from_dispatch":`)
	s, _ := jcs.Marshal(dispatchID)
	b.Write(s)
	b.WriteString(`,"items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := jcs.Marshal(it.Key)
		b.WriteString(`{"key":`)
		b.Write(k)
		b.WriteString(`,"value":`)
		b.Write(it.Value)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return extRow{Cause: causeFanOut, Task: f.spec.ID, Data: b.Bytes()}
}

// addedSpecs derives the specs of the tasks x adds from the specs of the run so far (spec
// looks one up by id), in the order they are added, with each item's key.
func addedSpecs(spec func(id string) *plan.Resolved, x extRow) ([]plan.Resolved, []string, error) {
	by := spec(x.Task)
	if by == nil {
		return nil, nil, fmt.Errorf("extension %d: task %q is not in the run", x.Seq, x.Task)
	}
	switch x.Cause {
	case causeFanOut:
		var d fanOutData
		if err := strictjson.Decode("fan-out extension", x.Data, maxExtData, &d); err != nil {
			return nil, nil, err
		}
		if by.FanOut == nil {
			return nil, nil, fmt.Errorf("extension %d: task %q is no fan-out", x.Seq, x.Task)
		}
		ib, err := newItemInput(by.FanOut.Template.Input)
		if err != nil {
			return nil, nil, err
		}
		specs, keys := make([]plan.Resolved, len(d.Items)), make([]string, len(d.Items))
		for i, it := range d.Items {
			s, err := itemSpec(by, ib, it)
			if err != nil {
				return nil, nil, err
			}
			specs[i], keys[i] = s, it.Key
		}
		return specs, keys, nil
	case causeReview:
		if by.Review == nil {
			return nil, nil, fmt.Errorf("extension %d: task %q has no review", x.Seq, x.Task)
		}
		return reviewerSpecs(by), nil, nil
	case causeFix:
		var d fixData
		if err := strictjson.Decode("fix extension", x.Data, maxExtData, &d); err != nil {
			return nil, nil, err
		}
		if by.OnFail == nil || by.OnFail.Fix == nil {
			return nil, nil, fmt.Errorf("extension %d: task %q has no fix loop", x.Seq, x.Task)
		}
		return []plan.Resolved{fixSpec(by, d)}, nil, nil
	}
	return nil, nil, fmt.Errorf("extension %d: unknown cause %q", x.Seq, x.Cause)
}

// itemSpec is fan-out f's task for item it: the template, with the item under "item" in its
// input (ib, made from the template's input).
func itemSpec(f *plan.Resolved, ib itemInput, it itemData) (plan.Resolved, error) {
	s := f.FanOut.Template
	s.ID = plan.ItemID(f.ID, it.Key)
	in := ib.with(it.Value)
	if len(in) > plan.MaxInputSize {
		return s, fmt.Errorf("item %q: its task's input is %d bytes in canonical JSON; at most %d", it.Key, len(in), plan.MaxInputSize)
	}
	s.Input = in
	return s, nil
}

// itemInput makes the canonical input of an item's task from the template's canonical input:
// the members ordered before "item" (RFC 8785 orders keys by their UTF-16 code units), the
// item, and the members after it, spliced without decoding the template again per item.
type itemInput struct{ head, tail []byte }

// newItemInput splits the template's canonical input object (nil: none) around "item",
// which the plan refuses in a template's input.
func newItemInput(in json.RawMessage) (itemInput, error) {
	if in == nil {
		return itemInput{head: []byte(`{`), tail: []byte(`}`)}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(in, &m); err != nil {
		return itemInput{}, fmt.Errorf("template input: %w", err)
	}
	if _, ok := m["item"]; ok {
		return itemInput{}, fmt.Errorf("template input sets item, which each item's task gets")
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, compareUTF16)
	head, tail := []byte{'{'}, []byte{}
	for _, k := range keys {
		kb, err := jcs.Marshal(k)
		if err != nil {
			return itemInput{}, err
		}
		member := append(append(kb, ':'), m[k]...)
		if compareUTF16(k, "item") < 0 {
			head = append(append(head, member...), ',')
		} else {
			tail = append(append(tail, ','), member...)
		}
	}
	return itemInput{head: head, tail: append(tail, '}')}, nil
}

// with is the canonical input holding value (canonical JSON) under "item".
func (ib itemInput) with(value []byte) json.RawMessage {
	out := make([]byte, 0, len(ib.head)+len(`"item":`)+len(value)+len(ib.tail))
	out = append(append(append(append(out, ib.head...), `"item":`...), value...), ib.tail...)
	return out
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 orders object keys.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// reviewerSpecs are the review tasks of c's work: one per reviewer, given c's patch at
// /agora/inputs/patch/patch.diff and, in its own input, c's id and input and how to answer
// (reviewHow).
func reviewerSpecs(c *plan.Resolved) []plan.Resolved {
	in := workInput(c, nil, reviewHow(c))
	out := make([]plan.Resolved, len(c.Review.Subagents))
	for i, sub := range c.Review.Subagents {
		out[i] = plan.Resolved{
			ID: plan.ReviewID(c.ID, sub), Subagent: sub, Target: c.Target, Env: c.Env, Input: in,
			Retry: c.Retry, Timeout: c.Timeout,
			// A stacked task's reviewers read its patch in the tree it was made in.
			Rare: &plan.Rare{Needs: workNeeds(c.ID, c.Verify != nil), Base: c.Base},
		}
	}
	return out
}

// fixSpec is loop task t's fix d.N: the fixer, given the rejected patch and the reasons, with
// t's place (target, env, locks, timeout, retry) and t's gates, so its work is judged as t's.
func fixSpec(t *plan.Resolved, d fixData) plan.Resolved {
	return plan.Resolved{
		ID: plan.FixID(t.ID, d.N), Subagent: t.OnFail.Fix.Subagent, Target: t.Target, Env: t.Env, Locks: t.Locks,
		Input: workInput(t, &d, ""), Retry: t.Retry, Timeout: t.Timeout,
		Rare: &plan.Rare{
			Needs: workNeeds(d.From, t.Verify != nil), Review: t.Review, Verify: t.Verify,
			// A stacked task's fix starts from the same bases: the rejected patch is against them.
			Base: t.Base,
		},
	}
}

// Input keys of the tasks that judge or fix another's work.
const (
	fixPatchKey = "patch"  // the work's patch (a fix starts from it)
	verdictKey  = "verify" // the work's verify gate verdict, when it had a gate
)

// workNeeds hands task from's work to a reviewer or a fix: its patch, and its verdict when
// it had a verify gate.
func workNeeds(from string, verified bool) map[string]plan.Need {
	n := map[string]plan.Need{fixPatchKey: {From: from, Select: plan.SelectPatch}}
	if verified {
		n[verdictKey] = plan.Need{From: from, Select: plan.SelectVerify}
	}
	return n
}

// reviewKey is the key of a reviewer's input that says how to give its review.
const reviewKey = "review"

// reviewHow tells a reviewer of c's work where the work is and that its review is its final
// answer, in the one form the host reads ([DecodeFinalReview]). It is in the reviewer's
// input, which a model runtime gives the model as its first message (the whole input JSON,
// there being no "prompt"), so every reviewer is told whatever its system prompt says.
func reviewHow(c *plan.Resolved) string {
	where := "The work's patch is /agora/inputs/patch/patch.diff."
	if c.Verify != nil {
		where += " Its verify gate's verdict is /agora/inputs/verify/verify.json and the end of the gate's output /agora/inputs/verify/output.txt."
	}
	return "You review the work of task " + c.ID + ": judge whether it does what the task's input asks, well. " + where +
		" Your review is your final answer and nothing else: reply with exactly one JSON object, " + ReviewFormat +
		", approve true only if the work should be kept. No file you or a command write is read as your review."
}

// workInput is the input of a task that judges or fixes t's work: {"task": ID, "input":
// t's input}, for a reviewer how to give its review (how), and for a fix its attempt number
// and the reasons its work was rejected. When that is over the input limit, t's input is left
// out ("input_omitted": true).
func workInput(t *plan.Resolved, fix *fixData, how string) json.RawMessage {
	m := map[string]any{"task": t.ID}
	if how != "" {
		m[reviewKey] = how
	}
	if fix != nil {
		reasons := make([]any, len(fix.Reasons))
		for i, r := range fix.Reasons {
			reasons[i] = r
		}
		m["attempt"], m["reasons"] = int64(fix.N), reasons
	}
	if t.Input != nil {
		m["input"] = json.RawMessage(t.Input)
	}
	b, err := marshalInput(m)
	if err != nil || len(b) > plan.MaxInputSize {
		delete(m, "input")
		m["input_omitted"] = true
		b, _ = marshalInput(m)
	}
	return b
}

// marshalInput is m in canonical form; json.RawMessage values are decoded first.
func marshalInput(m map[string]any) (json.RawMessage, error) {
	for k, v := range m {
		if raw, ok := v.(json.RawMessage); ok {
			var x any
			if err := decodeNumbers(raw, &x); err != nil {
				return nil, err
			}
			m[k] = x
		}
	}
	return jcs.Marshal(m)
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// specOf is the spec of r's task id, or nil.
func (r *run) specOf(id string) *plan.Resolved {
	if t := r.task(id); t != nil {
		return t.spec
	}
	return nil
}

// extend adds the tasks of x to r in this batch, for task by (their needs are products of
// from's attempt fromDispatch), with its orch.run.extended entry. It returns the added tasks,
// none when x was applied before.
func (e *Engine) extend(r *run, by *task, x extRow, fromDispatch string) ([]*task, error) {
	x.Seq = r.exts
	specs, keys, err := addedSpecs(r.specOf, x)
	if err != nil {
		return nil, err
	}
	if len(specs) > 0 && r.task(specs[0].ID) != nil {
		return nil, nil
	}
	if n := len(r.tasks) + len(specs); n > MaxRunTasks {
		return nil, fmt.Errorf("the run would hold %d tasks; at most %d", n, MaxRunTasks)
	}
	added := e.addTasks(r, by, x, specs, keys)
	for _, t := range added {
		t.fresh = true
		e.touch(t)
	}
	e.b.exts = append(e.b.exts, extInsert{run: r, row: x, first: len(r.tasks) - len(added), count: len(added)})
	details := map[string]any{"cause": x.Cause, "task": by.spec.ID, "from_dispatch": fromDispatch, "count": int64(len(added))}
	ids := make([]string, len(added))
	n := 0
	for i, t := range added {
		ids[i] = t.spec.ID
		n += len(t.spec.ID) + 3
	}
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	details["ids_sha256"] = hex.EncodeToString(sum[:])
	if n <= maxListedIDs {
		details["ids"] = anyStrings(ids)
	} else if len(ids) > 0 {
		// The ids of a large fan-out would outgrow an entry: their digest binds them, and
		// every one of them has its own entries.
		details["first"], details["last"] = ids[0], ids[len(ids)-1]
	}
	if x.Cause == causeFanOut {
		sum := sha256.Sum256(x.Data)
		details["data_sha256"] = hex.EncodeToString(sum[:])
	}
	e.record(r, by, entry.RunExtended, details)
	return added, nil
}

// maxListedIDs is how many bytes of ids an orch.run.extended entry lists.
const maxListedIDs = 64 << 10

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// addTasks adds the tasks of specs to r, pending, linked to by as x's cause has them; the
// engine at run time and load at start share it, so both build the same run.
func (e *Engine) addTasks(r *run, by *task, x extRow, specs []plan.Resolved, keys []string) []*task {
	added := make([]*task, len(specs))
	for i := range specs {
		spec := &specs[i]
		t := &task{run: r, idx: len(r.tasks), spec: spec, state: lifecycle.TaskPending, qidx: -1, timerIdx: -1,
			ext: &ext{role: x.Cause, by: by}, rare: noRare}
		if keys != nil {
			t.key = keys[i]
		}
		r.tasks = append(r.tasks, t)
		if r.byID != nil {
			r.byID[spec.ID] = t
		}
		added[i] = t
		for _, d := range spec.Deps {
			dep := r.task(d)
			t.deps = append(t.deps, dep)
			dep.dependents = append(dep.dependents, t)
			if dep.state != lifecycle.TaskSucceeded {
				t.unmet++
			}
		}
		for _, l := range spec.Locks {
			t.locks = append(t.locks, lockReq{l: e.lock(l.Name), shared: l.Mode == "shared"})
		}
	}
	r.counts[lifecycle.TaskPending] += len(added)
	e.held += len(added)
	switch x.Cause {
	case causeFanOut:
		links := by.own()
		links.extended = true
		links.children = append(links.children, added...)
		for _, c := range added {
			// The fan-out is done when its items are: each is a dependency of it.
			by.deps = append(by.deps, c)
			c.dependents = append(c.dependents, by)
			by.unmet++
		}
	case causeReview:
		links := by.own()
		links.reviewers = append(links.reviewers, added...)
	case causeFix:
		links := by.own()
		links.fixes = append(links.fixes, added...)
	}
	r.exts++
	e.storeSpecs(r, x, specs)
	return added
}

// storeSpecs adds the specs of x's tasks to the specs Status reads. The stored slice is only
// ever appended to: a reader holding the previous value reads a prefix nobody writes.
func (e *Engine) storeSpecs(r *run, x extRow, specs []plan.Resolved) {
	v, _ := e.specs.Load(r.id)
	rs, _ := v.(runSpecs)
	for i := range specs {
		rs.tasks = append(rs.tasks, &specs[i])
		rs.added = append(rs.added, api.Added{Cause: x.Cause, Task: x.Task})
	}
	e.specs.Store(r.id, rs)
}

// extInsert is an extension row to write in this batch.
type extInsert struct {
	run          *run
	row          extRow
	first, count int
}

// insertExtensions writes each extension's row and its tasks' rows, with their state as
// this batch leaves them (a run inserted in this batch has its tasks written with it).
func (e *Engine) insertExtensions(ctx context.Context, tx *sql.Tx, exts []extInsert) error {
	for _, x := range exts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_extensions(run_id, seq, cause, task, first, count, data) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			x.run.id, x.row.Seq, x.row.Cause, x.row.Task, x.first, x.count, x.row.Data); err != nil {
			return err
		}
		if x.run.inserted {
			continue
		}
		if err := e.insertTasks(ctx, tx, x.run, x.run.tasks[x.first:x.first+x.count]); err != nil {
			return err
		}
	}
	return nil
}

// voteJSON is a reviewer's review as its row keeps it, "" for none.
func voteJSON(t *task) string {
	if t.vote == nil {
		return ""
	}
	b, _ := json.Marshal(t.vote)
	return string(b)
}

// loadExtensions applies r's stored extensions, in order, to its freshly built tasks.
func (e *Engine) loadExtensions(ctx context.Context, db *sql.DB, r *run) error {
	rows, err := readExtensions(ctx, db, r.id)
	if err != nil {
		return err
	}
	for _, x := range rows {
		if x.Seq != r.exts {
			return fmt.Errorf("load run %s: extension %d found where %d was due", r.id, x.Seq, r.exts)
		}
		specs, keys, err := addedSpecs(r.specOf, x)
		if err != nil {
			return fmt.Errorf("load run %s: %w", r.id, err)
		}
		e.addTasks(r, r.task(x.Task), x, specs, keys)
	}
	return nil
}

// readExtensions reads run id's extension rows in order.
func readExtensions(ctx context.Context, db querier, id string) ([]extRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT seq, cause, task, data FROM run_extensions WHERE run_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("run %s: read its extensions: %w", id, err)
	}
	defer rows.Close()
	var out []extRow
	for rows.Next() {
		var x extRow
		if err := rows.Scan(&x.Seq, &x.Cause, &x.Task, &x.Data); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// extendedSpecs is specs (a run's plan, resolved) with the tasks its stored extensions
// added, and why each was added: the same derivation the engine makes.
func extendedSpecs(ctx context.Context, db querier, id string, specs []plan.Resolved) ([]plan.Resolved, []api.Added, error) {
	rows, err := readExtensions(ctx, db, id)
	if err != nil || len(rows) == 0 {
		return specs, nil, err
	}
	index := make(map[string]int, len(specs))
	for i := range specs {
		index[specs[i].ID] = i
	}
	lookup := func(id string) *plan.Resolved {
		if i, ok := index[id]; ok {
			return &specs[i]
		}
		return nil
	}
	var added []api.Added
	for _, x := range rows {
		more, _, err := addedSpecs(lookup, x)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", id, err)
		}
		for _, s := range more {
			index[s.ID] = len(specs)
			specs = append(specs, s)
			added = append(added, api.Added{Cause: x.Cause, Task: x.Task})
		}
	}
	return specs, added, nil
}

// cancelAdded cancels what a cancelled task added and has not ended: a fan-out's items, a
// task's reviewers and fixes (the run's tasks the cancel asked for must not go on).
func (e *Engine) cancelAdded(t *task) {
	for _, set := range [][]*task{t.children, t.reviewers, t.fixes} {
		for _, x := range set {
			if lifecycle.TaskEnded(x.state) {
				continue
			}
			e.cancelTask(x)
			if x.state == lifecycle.TaskCancelled {
				e.skipDependents(x, lifecycle.TaskCancelled)
			}
			e.cancelAdded(x)
		}
	}
}

// notRetryable says why `orch retry` may not take t, or "": a fan-out is redone by retrying
// its items (or its producer), and a task whose work was judged is not judged again.
func notRetryable(t *task) string {
	switch {
	case t.spec.FanOut != nil:
		return "is a fan-out: retry the item that failed, or its producer " + t.spec.FanOut.From
	case t.role == causeReview || t.role == causeFix:
		return "was added to judge or fix the work of task " + t.by.spec.ID + "; its loop is not run again by retry"
	case len(t.reviewers) > 0 || len(t.fixes) > 0:
		return "had its work reviewed or fixed; a judged task is not run again by retry (submit the plan again)"
	}
	return ""
}
