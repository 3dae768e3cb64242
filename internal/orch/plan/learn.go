package plan

import (
	"maps"
	"slices"
	"strconv"
)

// A learn task (learn: true, docs/learn.md) runs under a grant nobody enforces: what the grant
// would refuse is recorded instead of refused. Its products are therefore evidence for a
// person, never input for other work: the engine refuses them at run time (the dispatch's
// learn mark), and the plan is refused here first when it asks for such a hand-off, so whoever
// wrote it learns before anything runs.

// LearnTasks lists the ids of the plan's learn tasks, in plan order; nil when it has none.
func (p *Plan) LearnTasks() []string {
	var out []string
	for i := range p.Tasks {
		if p.Tasks[i].Learn() {
			out = append(out, p.Tasks[i].ID)
		}
	}
	return out
}

// learnTasks refuses what a learn task cannot be part of: a fan-out task (it runs nothing
// itself), a review or fix loop (they judge and repair a patch, which a learn patch may not
// become), and any task, fan-out, needs or base taking a learn task's products.
func (v *validator) learnTasks(tasks []Task, docs []*taskDoc) {
	learn := map[string]bool{}
	for i := range tasks {
		switch d := docs[i]; {
		case d == nil: // dropped: none of the fields below set
		case d.Learn != nil && d.FanOut != nil:
			v.add(taskPath(i)+".learn", "a fan_out task runs nothing itself and its items are not learn tasks; give the learn work a task of its own")
		case tasks[i].Learn() && d.Review != nil:
			v.add(taskPath(i)+".learn", "a learn task's patch is never reviewed (docs/learn.md): drop review or learn")
		case tasks[i].Learn() && d.OnFail != nil:
			v.add(taskPath(i)+".learn", "a learn task's patch is never fixed (docs/learn.md): drop on_fail or learn")
		}
		if tasks[i].Learn() && tasks[i].ID != "" {
			learn[tasks[i].ID] = true
		}
	}
	if len(learn) == 0 {
		return
	}
	const why = "is a learn task: its products feed no other task (docs/learn.md); a person takes its patch with `agora dispatch patch ID --include-learn`"
	for i := range tasks {
		t := &tasks[i]
		if t.FanOut() != nil {
			if learn[t.FanOut().From] {
				v.add(taskPath(i)+".fan_out.from", "task %q %s", t.FanOut().From, why)
			}
			v.learnNeeds(taskPath(i)+".fan_out.template.needs", t.FanOut().Template.Needs(), learn, why)
			v.learnBases(taskPath(i)+".fan_out.template.base", t.FanOut().Template.Base(), learn, why)
			continue
		}
		v.learnNeeds(taskPath(i)+".needs", t.Needs(), learn, why)
		v.learnBases(taskPath(i)+".base", t.Base(), learn, why)
	}
}

// learnBases refuses each base that is a learn task: a stack is built from its bases'
// patches, which a learn task's is not to become.
func (v *validator) learnBases(path string, base []string, learn map[string]bool, why string) {
	for k, b := range base {
		if learn[b] {
			v.add(path+"["+strconv.Itoa(k)+"]", "task %q %s", b, why)
		}
	}
}

// learnNeeds refuses each hand-off (in key order) from a learn task.
func (v *validator) learnNeeds(path string, needs map[string]Need, learn map[string]bool, why string) {
	for _, key := range slices.Sorted(maps.Keys(needs)) {
		if n := needs[key]; learn[n.From] {
			v.add(path+"."+key+".from", "task %q %s", n.From, why)
		}
	}
}
