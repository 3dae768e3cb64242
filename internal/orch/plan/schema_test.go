package plan_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestJSONSchema: the schema is generated from the decoder's types with a description for
// every field, resolves, and accepts every example plan the docs and examples/ ship.
func TestJSONSchema(t *testing.T) {
	s := plan.JSONSchema()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"workspace"`, `"revision"`, `"depends_on"`, `"needs"`, `"locks"`, `"retry"`, `"timeout"`, `"grants"`, `"input"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("schema lacks %s", f)
		}
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../../examples/plans/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example plans found under examples/plans")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Parse(f, src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var v any
		if err := json.Unmarshal(p.Canonical(), &v); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(v); err != nil {
			t.Errorf("%s parses but fails the schema: %v", f, err)
		}
	}
	// The schema refuses what the decoder refuses for a field's presence.
	var bad any
	json.Unmarshal([]byte(`{"version":1,"name":"x","tasks":[{"id":"a","subagent":"s","repo":"/etc"}]}`), &bad)
	if err := r.Validate(bad); err == nil {
		t.Error("the schema accepts a task field the decoder refuses (repo)")
	}
	// A plan as a model writes it from the schema alone: bare lock names, durations, needs.
	var written any
	json.Unmarshal([]byte(`{"version":1,"name":"fix-and-review","workspace":"app","revision":"main","concurrency":2,
		"defaults":{"timeout":"10m","retry":{"max_attempts":2}},
		"tasks":[{"id":"fix","subagent":"fixer","input":{"issue":"login times out"},"locks":["repo"]},
		{"id":"review","subagent":"reviewer","depends_on":["fix"],"needs":{"change":{"from":"fix","select":"patch"}},
		 "locks":[{"name":"repo","mode":"shared"}],"grants":{"tools":["read_file"]},"timeout":"5m"}]}`), &written)
	if err := r.Validate(written); err != nil {
		t.Errorf("a plan written to the schema fails it: %v", err)
	}
	b, _ = json.Marshal(written)
	if _, err := plan.Parse("written.json", b); err != nil {
		t.Errorf("a plan written to the schema does not parse: %v", err)
	}
}
