package plan_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

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

// TestJSONSchema_AgreesWithDecoder: at every object of the schema, the fields the schema
// lists are exactly the fields the decoder accepts there. The decoder names what it accepts
// in its unknown-field message, so a field added to (or dropped from) either side without
// the other fails here, including the hand-written lock form.
func TestJSONSchema_AgreesWithDecoder(t *testing.T) {
	known := regexp.MustCompile(`unknown field "agora_probe"; known fields: ([a-z_, ]+)`)
	var visited []string
	var walk func(s *jsonschema.Schema, path string, wrap func(any) any)
	walk = func(s *jsonschema.Schema, path string, wrap func(any) any) {
		for _, alt := range s.AnyOf {
			walk(alt, path, wrap)
		}
		switch {
		case s.Properties != nil:
			visited = append(visited, path)
			doc, _ := json.Marshal(wrap(map[string]any{"agora_probe": 1}))
			_, err := plan.Parse("probe.json", doc)
			m := known.FindStringSubmatch(fmt.Sprint(err))
			if m == nil {
				t.Errorf("%s: the schema lists fields but the decoder took agora_probe there: %s\n%v", orRoot(path), doc, err)
				return
			}
			var schemaFields []string
			for name := range s.Properties {
				schemaFields = append(schemaFields, name)
			}
			if path == ".tasks[]" {
				// learn is a person's key: the decoder reads it, the schema a model
				// follows does not offer it (a plan from an MCP client with it is refused).
				schemaFields = append(schemaFields, "learn")
			}
			slices.Sort(schemaFields)
			if got := strings.Join(schemaFields, ", "); got != m[1] {
				t.Errorf("%s: the schema lists %s; the decoder accepts %s", orRoot(path), got, m[1])
			}
			if s.AdditionalProperties == nil || s.AdditionalProperties.Not == nil {
				t.Errorf("%s: the schema allows other fields; the decoder refuses them", orRoot(path))
			}
			for name, child := range s.Properties {
				walk(child, path+"."+name, func(v any) any { return wrap(map[string]any{name: v}) })
			}
		case s.Items != nil:
			walk(s.Items, path+"[]", func(v any) any { return wrap([]any{v}) })
		case s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil:
			walk(s.AdditionalProperties, path+"{}", func(v any) any { return wrap(map[string]any{"k": v}) })
		}
	}
	walk(plan.JSONSchema(), "", func(v any) any { return v })
	// Every object of the format was reached: a walk that stopped early proves nothing.
	want := []string{"", ".budget", ".defaults", ".defaults.retry", ".defaults.verify", ".defaults.verify.expect", ".tasks[]", ".tasks[].budget", ".tasks[].fan_out", ".tasks[].fan_out.template",
		".tasks[].fan_out.template.budget", ".tasks[].fan_out.template.grants", ".tasks[].fan_out.template.grants.approve[]",
		".tasks[].fan_out.template.grants.egress[]", ".tasks[].fan_out.template.locks[]", ".tasks[].fan_out.template.needs{}",
		".tasks[].fan_out.template.on_fail", ".tasks[].fan_out.template.on_fail.fix", ".tasks[].fan_out.template.retry",
		".tasks[].fan_out.template.review", ".tasks[].fan_out.template.verify", ".tasks[].fan_out.template.verify.expect", ".tasks[].grants", ".tasks[].grants.approve[]", ".tasks[].grants.egress[]", ".tasks[].locks[]",
		".tasks[].needs{}", ".tasks[].on_fail", ".tasks[].on_fail.fix", ".tasks[].retry", ".tasks[].review", ".tasks[].verify", ".tasks[].verify.expect"}
	slices.Sort(visited)
	if !slices.Equal(visited, want) {
		t.Errorf("objects checked %q, want %q", visited, want)
	}
}

func orRoot(path string) string {
	if path == "" {
		return "the plan"
	}
	return strings.TrimPrefix(path, ".")
}

// TestJSONSchema_DocsPlans: every example plan in docs/plan.md passes the schema a model is
// given, as its canonical JSON (what a model would send over MCP).
func TestJSONSchema_DocsPlans(t *testing.T) {
	r, err := plan.JSONSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(readRepoFile(t, "docs/plan.md"))
	n := 0
	for _, b := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		if !strings.HasPrefix(b[1], "version: 1\n") {
			continue
		}
		n++
		p, err := plan.Parse("docs/plan.md", []byte(b[1]))
		if err != nil {
			t.Errorf("docs/plan.md example does not parse: %v", err)
			continue
		}
		var v any
		if err := json.Unmarshal(p.Canonical(), &v); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(v); err != nil {
			t.Errorf("docs/plan.md example parses but fails the schema: %v\n%s", err, b[1])
		}
	}
	if n == 0 {
		t.Error("docs/plan.md has no example plan")
	}
}
