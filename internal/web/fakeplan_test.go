package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// fakeExt is a run_extensions row as the engine writes it (internal/orch/extend.go).
type fakeExt struct {
	seq, first, count int
	cause, task       string
	data              []byte
}

// fakePlan is the plan of a run of tasks, as the engine would have run it, and the
// extension rows of the tasks it added (those with Added): they are not in the plan, whose
// tasks declare what adds them instead. A fan-out task (one with items) is a fan_out of its
// only dependency's list, templated by its items' subagent; a task with reviewers declares a
// review by their subagents (a fix's reviewers are its loop task's); a task with fixes
// declares on_fail.fix. Added tasks take the positions after the plan's, in the order given,
// and each extension row names them, as orch.Reader derives them again.
func fakePlan(t testing.TB, tasks []api.Task) ([]map[string]any, []fakeExt) {
	t.Helper()
	added := map[string]*api.Added{}
	planned := 0
	for _, task := range tasks {
		if task.Product != "" {
			t.Fatalf("fake: task %q is given a product; it is derived from its fixes", task.ID)
		}
		if task.Added != nil {
			added[task.ID] = task.Added
		} else {
			planned++
		}
	}
	// loopOf is the plan task whose declarations a task's extension derives from.
	loopOf := func(id string) string {
		for added[id] != nil && added[id].Cause == "fix" {
			id = added[id].Task
		}
		return id
	}
	type decl struct {
		items     string // the items' subagent
		reviewers []string
		fixer     string
		fixes     int
	}
	decls := map[string]*decl{}
	declOf := func(id string) *decl {
		if decls[id] == nil {
			decls[id] = &decl{}
		}
		return decls[id]
	}
	var exts []fakeExt
	pos := planned
	for _, task := range tasks {
		a := task.Added
		if a == nil {
			continue
		}
		last := len(exts) - 1
		grows := last >= 0 && exts[last].cause == a.Cause && exts[last].task == a.Task && a.Cause != "fix"
		switch a.Cause {
		case "fan_out":
			key, ok := strings.CutPrefix(task.ID, a.Task+"[")
			key, ok2 := strings.CutSuffix(key, "]")
			if !ok || !ok2 {
				t.Fatalf("fake: item %q is not %s[KEY]", task.ID, a.Task)
			}
			declOf(a.Task).items = task.Subagent
			item, _ := json.Marshal(map[string]any{"key": key, "value": map[string]string{"id": key}})
			if grows {
				exts[last].data = append(append(exts[last].data[:len(exts[last].data)-2], ','), append(item, ']', '}')...)
			} else {
				exts = append(exts, fakeExt{cause: a.Cause, task: a.Task, data: append([]byte(`{"from_dispatch":"","items":[`), append(item, ']', '}')...)})
			}
		case "review":
			sub, ok := strings.CutPrefix(task.ID, a.Task+".review-")
			if !ok {
				t.Fatalf("fake: reviewer %q is not %s.review-NAME", task.ID, a.Task)
			}
			if d := declOf(loopOf(a.Task)); !slices.Contains(d.reviewers, sub) {
				d.reviewers = append(d.reviewers, sub)
			}
			if !grows {
				exts = append(exts, fakeExt{cause: a.Cause, task: a.Task, data: []byte(`{"from_dispatch":""}`)})
			}
		case "fix":
			n, err := strconv.Atoi(strings.TrimPrefix(task.ID, a.Task+".fix-"))
			if err != nil || task.ID != fmt.Sprintf("%s.fix-%d", a.Task, n) {
				t.Fatalf("fake: fix %q is not %s.fix-N", task.ID, a.Task)
			}
			d := declOf(a.Task)
			d.fixer, d.fixes = task.Subagent, max(d.fixes, n)
			from := a.Task
			if n > 1 {
				from = fmt.Sprintf("%s.fix-%d", a.Task, n-1)
			}
			data, _ := json.Marshal(map[string]any{"n": n, "from": from, "from_dispatch": "", "reasons": []string{}})
			exts = append(exts, fakeExt{cause: a.Cause, task: a.Task, data: data})
		default:
			t.Fatalf("fake: task %q added by %q", task.ID, a.Cause)
		}
		if grows {
			exts[last].count++
		} else {
			exts[len(exts)-1].seq, exts[len(exts)-1].first, exts[len(exts)-1].count = len(exts)-1, pos, 1
		}
		pos++
	}
	var docs []map[string]any
	for _, task := range tasks {
		if task.Added != nil {
			continue
		}
		d := decls[task.ID]
		if d != nil && d.items != "" {
			if len(task.DependsOn) != 1 {
				t.Fatalf("fake: fan-out %q needs its producer, its only dependency", task.ID)
			}
			docs = append(docs, map[string]any{"id": task.ID, "fan_out": map[string]any{"from": task.DependsOn[0],
				"select": "output:items.json", "template": map[string]any{"subagent": d.items}}})
			continue
		}
		doc := map[string]any{"id": task.ID, "subagent": task.Subagent}
		var deps []string
		for _, dep := range task.DependsOn {
			if !slices.Contains(task.Needs, dep) {
				deps = append(deps, dep)
			}
		}
		if deps != nil {
			doc["depends_on"] = deps
		}
		if len(task.Needs) > 0 {
			needs := map[string]any{}
			for i, n := range task.Needs {
				needs[fmt.Sprintf("in%d", i)] = map[string]any{"from": n, "select": "patch"}
			}
			doc["needs"] = needs
		}
		if len(task.Locks) > 0 {
			doc["locks"] = task.Locks
		}
		if task.Verify != nil {
			doc["verify"] = task.Verify // Spec's JSON is the plan's form
		}
		if d != nil && len(d.reviewers) > 0 {
			doc["review"] = map[string]any{"subagents": d.reviewers, "approve": 1}
		}
		if d != nil && d.fixer != "" {
			doc["on_fail"] = map[string]any{"fix": map[string]any{"subagent": d.fixer, "max_attempts": d.fixes}}
		}
		docs = append(docs, doc)
	}
	return docs, exts
}
