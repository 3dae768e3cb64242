package plan

import (
	"fmt"
	"github.com/agora-dev/agora/internal/budget"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
	"github.com/agora-dev/agora/internal/verdict"
)

// The name patterns compile on first use, not at init.
var (
	planNamePattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`) })
	taskIDPattern     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })
	needKeyPattern    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`) })
	lockNamePattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]{0,127}$`) })
	targetNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
)

// validator turns a decoded document into a Plan, collecting every problem.
type validator struct {
	pos  *strictyaml.Positions
	errs strictyaml.Errors
	bad  map[string]bool // paths the decoder already reported: nothing more is said under them
	full bool            // MaxErrors reached
	more int             // problems found after MaxErrors, counted but not listed
	// stopped: the decoder gave up at its own limit, so how many more there are is unknown.
	stopped bool
	names   map[string]string // one copy of each name tasks repeat (name)
}

// maxNames bounds the names a validator keeps one copy of: the names a plan repeats
// (subagents, targets, locks) are few, and a plan of distinct names gains nothing from more.
const maxNames = 4096

// name is s, or the copy of it an earlier task of the plan holds. A decoder allocates each
// string it reads, so 100,000 tasks naming one subagent hold 100,000 copies of its name until
// the plan keeps just one.
func (v *validator) name(s string) string {
	if c, ok := v.names[s]; ok {
		return c
	}
	if v.names == nil {
		v.names = map[string]string{}
	}
	if len(v.names) < maxNames {
		v.names[s] = s
	}
	return s
}

func newValidator(pos *strictyaml.Positions, errs strictyaml.Errors) *validator {
	v := &validator{pos: pos, errs: errs, full: len(errs) >= MaxErrors, stopped: len(errs) > MaxErrors}
	for _, e := range errs {
		if v.bad == nil {
			v.bad = map[string]bool{}
		}
		v.bad[e.Path] = true // "" when the document itself did not decode: nothing more is said
	}
	return v
}

func (v *validator) add(path, format string, args ...any) {
	if v.reported(path) {
		return
	}
	if v.full {
		v.more++
		return
	}
	v.errs = append(v.errs, v.pos.Errorf(path, format, args...))
	v.full = len(v.errs) >= MaxErrors
}

// maxMessage caps one problem's message in bytes: messages quote what the plan says, and a
// plan may say a megabyte where a name belongs, so a refusal of 100 problems stays readable
// (and fits a model's context) whatever the plan holds.
const maxMessage = 512

// result is the problems found, in document order, each message cut at maxMessage, and after
// them how many more were found beyond [MaxErrors]; nil when there are none.
func (v *validator) result() error {
	if len(v.errs) == 0 {
		return nil
	}
	v.errs.Sort()
	for i := range v.errs {
		if m := v.errs[i].Msg; len(m) > maxMessage {
			end := maxMessage
			for end > 0 && !utf8.RuneStart(m[end]) {
				end--
			}
			v.errs[i].Msg = fmt.Sprintf("%s... (%d more bytes)", m[:end], len(m)-end)
		}
	}
	if v.more > 0 && !v.stopped {
		v.errs = append(v.errs, strictyaml.Error{File: v.errs[0].File,
			Msg: fmt.Sprintf("and %d more problems not listed: the first %d are; fix them and check again", v.more, MaxErrors)})
	}
	return v.errs
}

// reported reports whether the decoder already found a problem at path or an ancestor of it:
// a value that did not decode would otherwise be reported again as missing.
func (v *validator) reported(path string) bool {
	if len(v.bad) == 0 {
		return false
	}
	for {
		if v.bad[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return v.bad[""]
		}
		path = path[:i]
	}
}

func (v *validator) plan(doc *planDoc) *Plan {
	p := &Plan{Version: Version, Name: doc.Name, Concurrency: DefaultConcurrency}
	switch {
	case doc.Version == nil:
		v.add("version", "required; this format is version %d", Version)
	case *doc.Version != Version:
		v.add("version", "unsupported version %d; want %d", *doc.Version, Version)
	}
	switch {
	case doc.Name == "":
		v.add("name", "required")
	case !planNamePattern().MatchString(doc.Name):
		v.add("name", "invalid plan name %q: use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", doc.Name)
	}
	if c := doc.Concurrency; c != nil {
		if *c < 1 || *c > MaxConcurrency {
			v.add("concurrency", "want 1 to %d, got %d", MaxConcurrency, *c)
		}
		p.Concurrency = *c
	}
	p.Queue = v.queue(doc.Queue)
	p.Workspace, p.Revision = doc.Workspace, doc.Revision
	if doc.Workspace != "" {
		if err := checkRef(catalog.KindWorkspace, doc.Workspace); err != nil {
			v.add("workspace", "%v", err)
		}
	}
	if doc.Revision != "" {
		switch {
		case doc.Workspace == "":
			v.add("revision", "a revision needs a workspace: name the workspace the run works on")
		default:
			if _, err := catalog.ParseRevision(doc.Revision); err != nil {
				v.add("revision", "%v", err)
			}
		}
	}
	p.Defaults = v.defaults(&doc.Defaults)
	p.Tasks = v.tasks(doc.Tasks, p.Defaults.Retry)
	v.budgets(p, doc)
	v.extensions(p, doc)
	return p
}

// budgets checks the run's budget and each task's narrowing of it: a task may narrow the
// plan's budget, never raise it.
func (v *validator) budgets(p *Plan, doc *planDoc) {
	if doc.Budget != nil {
		if err := doc.Budget.Validate(); err != nil {
			v.add("budget", "%v", err)
		} else {
			p.Budget = *doc.Budget
		}
	}
	for i, d := range doc.Tasks {
		if d == nil || d.Budget == nil || i >= len(p.Tasks) {
			continue
		}
		b := d.Budget
		tp := "tasks[" + strconv.Itoa(i) + "].budget"
		if _, err := budget.Narrow(*b, budget.Ceiling{Source: "plan " + strconv.Quote(p.Name), Budget: p.Budget}); err != nil {
			v.add(tp, "%v", err)
			continue
		}
		p.Tasks[i].rare().Budget = *b
	}
}

func (v *validator) defaults(doc *defaultsDoc) Defaults {
	d := Defaults{Target: doc.Target}
	v.target("defaults.target", doc.Target)
	d.Env = v.envs("defaults.env", doc.Env)
	if len(d.Env) == 0 {
		d.Env = nil // no env bundles either way
	}
	d.Timeout = v.timeout("defaults.timeout", doc.Timeout)
	d.Retry = v.retry("defaults.retry", doc.Retry, nil)
	d.Verify = v.verify("defaults.verify", doc.Verify)
	return d
}

func (v *validator) target(path, name string) {
	if name != "" && !targetNamePattern().MatchString(name) {
		v.add(path, "invalid target name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
}

func (v *validator) timeout(path string, t *time.Duration) time.Duration {
	if t == nil {
		return 0
	}
	if *t <= 0 || *t > MaxTimeout {
		v.add(path, "want more than 0s and at most %s, got %s", MaxTimeout, *t)
	}
	return *t
}

// retry checks a retry block; inherited is the policy it overrides (nil: the defaults block
// itself, which overrides the built-in policy).
func (v *validator) retry(path string, doc *retryDoc, inherited *Retry) *Retry {
	if doc == nil {
		return nil
	}
	var r Retry
	if m := doc.MaxAttempts; m != nil {
		if *m < 1 || *m > MaxRetryAttempts {
			v.add(path+".max_attempts", "want 1 to %d, got %d", MaxRetryAttempts, *m)
		}
		r.MaxAttempts = *m
	}
	if b := doc.InitialBackoff; b != nil {
		v.backoff(path+".initial_backoff", *b)
		r.InitialBackoff = *b
	}
	if b := doc.MaxBackoff; b != nil {
		v.backoff(path+".max_backoff", *b)
		r.MaxBackoff = *b
	}
	if m := doc.Multiplier; m != nil {
		if *m < minMultiplier || *m > MaxRetryMultiplier {
			v.add(path+".multiplier", "want %g to %g, got %g", minMultiplier, MaxRetryMultiplier, *m)
		}
		r.Multiplier = *m
	}
	if w := doc.OnWorkerFailed; w != nil {
		b := *w
		r.OnWorkerFailed = &b
	}
	// The bound that matters is the effective one, but a conflict inherited unchanged was
	// reported where it was written.
	if doc.InitialBackoff != nil || doc.MaxBackoff != nil {
		eff := DefaultRetry().with(inherited).with(&r)
		if eff.InitialBackoff > eff.MaxBackoff && eff.InitialBackoff > 0 && eff.MaxBackoff > 0 {
			v.add(path, "initial_backoff %s is longer than max_backoff %s", eff.InitialBackoff, eff.MaxBackoff)
		}
	}
	if r == (Retry{}) {
		return nil // an empty block changes nothing
	}
	return &r
}

func (v *validator) backoff(path string, b time.Duration) {
	if b <= 0 || b > MaxRetryBackoff {
		v.add(path, "want more than 0s and at most %s, got %s", MaxRetryBackoff, b)
	}
}

// taskPath is the path of the plan's task i.
func taskPath(i int) string { return "tasks[" + strconv.Itoa(i) + "]" }

// kept reports whether a task's document is read again once the task is built: by the
// checks of the whole plan (budgets, extensions, learnTasks), which read only these fields.
func (d *taskDoc) kept() bool {
	return d.Budget != nil || d.FanOut != nil || d.Learn != nil || d.Review != nil || d.OnFail != nil
}

// tasks checks every task, then the graph they form. Each task's document is dropped (set
// to nil in docs) once its task is built, unless a later check reads it ([taskDoc.kept]), so
// a large plan's documents and its tasks are not all alive at once.
func (v *validator) tasks(docs []*taskDoc, defaultRetry *Retry) []Task {
	switch {
	case len(docs) == 0:
		v.add("tasks", "required; a plan has at least one task")
		return nil
	case len(docs) > MaxTasks:
		v.add("tasks", "%d tasks; at most %d", len(docs), MaxTasks)
		return nil
	}
	for i := range docs {
		if docs[i] == nil {
			docs[i] = &taskDoc{} // null, read as the empty task it was when tasks held values
		}
	}
	v.canonicalInputs(docs)
	ids := make(map[string]int, len(docs))
	tasks := make([]Task, len(docs))
	for i := range docs {
		id := docs[i].ID
		tasks[i].ID = id
		switch first, dup := ids[id]; {
		case id == "":
			v.add(taskPath(i)+".id", "required")
		case !taskIDPattern().MatchString(id):
			v.add(taskPath(i)+".id", "invalid task id %q: use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit", id)
		case dup:
			v.add(taskPath(i)+".id", "duplicate task id %q (first at tasks[%d])", id, first)
		default:
			ids[id] = i
		}
	}
	g := newGraph(len(docs))
	for i := range docs {
		v.task(&tasks[i], docs[i], taskPath(i), ids, g, defaultRetry)
		g.close()
		if !docs[i].kept() {
			docs[i] = nil
		}
	}
	v.cycles(g, tasks)
	v.learnTasks(tasks, docs)
	// A dependency names its task by a string of its own, decoded where it was written: the
	// task's id string takes its place, so a plan keeps one copy of each id however many
	// tasks depend on it.
	for i := range tasks {
		for k, dep := range tasks[i].DependsOn {
			if j, ok := ids[dep]; ok {
				tasks[i].DependsOn[k] = tasks[j].ID
			}
		}
	}
	return tasks
}

func (v *validator) task(t *Task, doc *taskDoc, tp string, ids map[string]int, g *graph, defaultRetry *Retry) {
	if doc.FanOut != nil {
		v.fanOutTask(t, doc, tp, ids, g, defaultRetry)
		return
	}
	self := t.ID
	t.Subagent = v.name(doc.Subagent)
	if doc.Subagent == "" {
		v.add(tp+".subagent", "required")
	} else if err := checkRef(catalog.KindSubagent, doc.Subagent); err != nil {
		v.add(tp+".subagent", "%v", err)
	}
	t.Target = v.name(doc.Target)
	v.target(tp+".target", doc.Target)
	t.Env = v.envs(tp+".env", doc.Env)
	t.Input = v.input(tp+".input", doc.Input)
	var rare TaskRare
	rare.Timeout = v.timeout(tp+".timeout", doc.Timeout)
	rare.Retry = v.retry(tp+".retry", doc.Retry, defaultRetry)

	if n := len(doc.DependsOn); n > MaxDependsOn {
		v.add(tp+".depends_on", "%d dependencies; at most %d", n, MaxDependsOn)
	} else if n > 0 {
		t.DependsOn = doc.DependsOn
		for k, dep := range doc.DependsOn {
			v.edge(tp+".depends_on["+strconv.Itoa(k)+"]", self, dep, ids, g)
			for _, prev := range doc.DependsOn[:k] {
				if prev == dep {
					v.add(tp+".depends_on["+strconv.Itoa(k)+"]", "task %q listed twice", dep)
					break
				}
			}
		}
	}
	rare.Base = v.base(tp+".base", self, doc.Base, ids, g)
	rare.Needs = v.needs(tp+".needs", self, doc.Needs, ids, g)
	if _, clash := rare.Needs[StackKey]; clash && len(rare.Base) > 0 {
		v.add(tp+".needs."+StackKey, "a stacked task's bases are mounted under /agora/inputs/%s/TASK/: name this input otherwise", StackKey)
	}
	t.Locks = v.locks(tp+".locks", doc.Locks)
	// What the task was built from and nothing later reads is dropped now: the decoded input
	// (a map, several hundred bytes for the smallest object) once it is canonical JSON, the
	// decoded locks once they are the task's. A large plan's are then not all alive at once
	// beside the tasks built from them.
	doc.Input, doc.Locks = nil, nil
	rare.Grants = v.grants(tp+".grants", doc.Grants)
	rare.Verify = v.verify(tp+".verify", doc.Verify)
	rare.Review = v.review(tp+".review", doc.Review)
	rare.OnFail = v.onFail(tp+".on_fail", doc.OnFail)
	rare.Learn = doc.Learn != nil && *doc.Learn
	if !rare.isZero() {
		own := rare // copied here, so a task that sets none of them allocates none
		t.Rare = &own
	}
}

// base checks a task's base list: known tasks, none twice, not itself, at most MaxDependsOn;
// each is an edge of the graph (a base must succeed first).
func (v *validator) base(path, self string, base []string, ids map[string]int, g *graph) []string {
	switch n := len(base); {
	case n > MaxDependsOn:
		v.add(path, "%d bases; at most %d", n, MaxDependsOn)
		return nil
	case n == 0:
		return nil
	}
	for k, b := range base {
		v.edge(path+"["+strconv.Itoa(k)+"]", self, b, ids, g)
		for _, prev := range base[:k] {
			if prev == b {
				v.add(path+"["+strconv.Itoa(k)+"]", "task %q listed twice", b)
				break
			}
		}
	}
	return base
}

// verify checks a verify gate: a command (an argv), a timeout within MaxTimeout, protect and
// changes globs that compile, the evidence expected; each problem at its own path.
func (v *validator) verify(path string, doc *verifyDoc) *verdict.Spec {
	if doc == nil {
		return nil
	}
	s := &verdict.Spec{Command: doc.Command, Protect: doc.Protect, Changes: doc.Changes}
	if err := verdict.CheckCommand(doc.Command); err != nil {
		v.add(path+".command", "%v", err)
	}
	if doc.Timeout != nil {
		s.Timeout = v.timeout(path+".timeout", doc.Timeout)
	}
	v.globs(path+".protect", "protect", doc.Protect, verdict.MaxProtect)
	if doc.Changes != nil && len(doc.Changes) == 0 {
		// An empty allow-list would read as "may change nothing", but a gate without changes
		// admits any path protect does not name: refuse the ambiguity.
		v.add(path+".changes", "empty; name the paths the work may change (src/**), or leave changes out to admit any path protect does not name")
	}
	v.globs(path+".changes", "changes", doc.Changes, verdict.MaxChanges)
	if e := doc.Expect; e != nil {
		s.Expect = &verdict.Expect{JUnit: e.JUnit}
		if e.MinTests != nil {
			if *e.MinTests < 1 {
				v.add(path+".expect.min_tests", "%d: want at least 1 (leave it out for 1)", *e.MinTests)
			} else {
				s.Expect.MinTests = *e.MinTests
			}
		}
		if err := s.Expect.Check(); err != nil {
			field := ".expect.junit"
			if strings.Contains(err.Error(), "min_tests") {
				field = ".expect.min_tests"
			}
			v.add(path+field, "%v", err)
		}
	}
	return s
}

// globs checks a gate's protect or changes globs: each compiles, none twice, at most most.
func (v *validator) globs(path, kind string, globs []string, most int) {
	if len(globs) > most {
		v.add(path, "%d patterns; at most %d", len(globs), most)
		return
	}
	for i, p := range globs {
		ip := path + "[" + strconv.Itoa(i) + "]"
		if err := verdict.CheckPattern(p); err != nil {
			v.add(ip, "%s glob %q: %v", kind, p, err)
			continue
		}
		for _, q := range globs[:i] {
			if q == p {
				v.add(ip, "%q listed twice", p)
				break
			}
		}
	}
}

// grants checks a task's narrowing: known tool names, valid command patterns, host names,
// no duplicates, at most MaxGrantItems of each.
func (v *validator) grants(path string, doc *grant.Set) *grant.Set {
	if doc == nil {
		return nil
	}
	list := func(field string, items []string, check func(string) error) []string {
		p := path + "." + field
		if len(items) > MaxGrantItems {
			v.add(p, "%d items; at most %d", len(items), MaxGrantItems)
			return items
		}
		seen := map[string]bool{}
		for i, it := range items {
			ip := p + "[" + strconv.Itoa(i) + "]"
			switch {
			case seen[it]:
				v.add(ip, "%q listed twice", it)
			case check != nil:
				if err := check(it); err != nil {
					v.add(ip, "%v", err)
				}
			}
			seen[it] = true
		}
		return items
	}
	return &grant.Set{
		Tools: list("tools", doc.Tools, func(s string) error {
			if !grant.IsBuiltinTool(s) {
				return fmt.Errorf("unknown tool %q; known: %s", s, strings.Join(grant.BuiltinTools, ", "))
			}
			return nil
		}),
		Commands: list("commands", doc.Commands, func(s string) error {
			_, err := grant.ParseCommandPattern(s)
			return err
		}),
		Egress: v.egressRules(path+".egress", doc.Egress),
	}
}

// egressRules checks a task's egress rules: each valid, none twice, at most MaxGrantItems.
func (v *validator) egressRules(path string, rules []grant.EgressRule) []grant.EgressRule {
	if len(rules) > MaxGrantItems {
		v.add(path, "%d items; at most %d", len(rules), MaxGrantItems)
		return rules
	}
	seen := map[string]bool{}
	for i, r := range rules {
		r = r.Clean()
		rules[i] = r
		ip := path + "[" + strconv.Itoa(i) + "]"
		key := r.String()
		if seen[key] {
			v.add(ip, "%q listed twice", key)
		} else if err := r.Validate(); err != nil {
			v.add(ip, "%v", err)
		}
		seen[key] = true
	}
	return rules
}

// edge checks that task self may depend on dep and records the edge.
func (v *validator) edge(path, self, dep string, ids map[string]int, g *graph) {
	j, ok := ids[dep]
	switch {
	case dep == self && self != "":
		v.add(path, "task %q depends on itself", dep)
	case dep == "":
		v.add(path, "required")
	case !ok:
		v.add(path, "unknown task %q", dep)
	default:
		g.add(j)
	}
}

func (v *validator) envs(path string, refs []string) []string {
	if len(refs) > MaxEnvs {
		v.add(path, "%d env bundles; at most %d", len(refs), MaxEnvs)
		return refs
	}
	for k, ref := range refs {
		if err := checkRef(catalog.KindEnv, ref); err != nil {
			v.add(path+"["+strconv.Itoa(k)+"]", "%v", err)
			continue
		}
		for _, prev := range refs[:k] {
			if prev == ref {
				v.add(path+"["+strconv.Itoa(k)+"]", "env bundle %q listed twice", ref)
				break
			}
		}
	}
	return refs
}

// checkRef checks the syntax of a catalog reference, NAME or NAME@sha256:HEX.
func checkRef(kind catalog.Kind, ref string) error {
	_, _, err := catalog.ParseRef(kind, ref)
	return err
}

// describeValue names the JSON type of a decoded free-form value, for messages.
func describeValue(x any) string {
	switch x.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", x)
}
