package plan_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// realPlans returns the plans this repository holds (the example plan, the plans of
// docs/*.md and the tests' full plans) with their canonical JSON and a JSON rendering of
// their YAML (the shape a client's encoder writes: indented, locks as written).
func realPlans(tb testing.TB) [][]byte {
	tb.Helper()
	srcs := []string{fullPlan, extendPlan, fullCanonical, layered(40, 10, 7)}
	files, _ := filepath.Glob("../../../examples/plans/*.yaml")
	docs, _ := filepath.Glob("../../../docs/*.md")
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	for _, f := range append(files, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if filepath.Ext(f) == ".yaml" {
			srcs = append(srcs, string(b))
			continue
		}
		for _, m := range block.FindAllSubmatch(b, -1) {
			if regexp.MustCompile(`(?m)^tasks:`).Match(m[1]) {
				srcs = append(srcs, string(m[1]))
			}
		}
	}
	var out [][]byte
	for _, s := range srcs {
		out = append(out, []byte(s))
		if p, err := plan.Parse("seed.yaml", []byte(s)); err == nil {
			out = append(out, p.Canonical())
		}
		var v any
		if yaml.Unmarshal([]byte(s), &v) == nil {
			if j, err := json.MarshalIndent(v, "", "  "); err == nil {
				out = append(out, j)
			}
		}
	}
	if len(out) < 12 {
		tb.Fatalf("found %d seed plans; the globs miss the examples or docs", len(out))
	}
	return out
}

// FuzzValidateJSON_MatchesYAML: Validate gives what it gives through strictyaml's YAML path
// alone (the same plan, the same problems at the same lines, catalog problems included),
// whether or not the JSON fast path takes the document.
func FuzzValidateJSON_MatchesYAML(f *testing.F) {
	for _, s := range realPlans(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"s","locks":["x",{"name":"y","mode":"shared"}],"id":"b"},{"id":"c","subagent":"nope","depends_on":["zz"],"timeout":"0s"}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, file := range []string{"f.json", ""} {
			refs := func() *fakeRefs {
				return &fakeRefs{subagents: []string{"s", "fixer", "scribe"}, envs: []string{"base"}, targets: []string{"local"}}
			}
			got, err := plan.Validate(context.Background(), file, src, refs())
			want, wantErr := plan.ValidateYAML(context.Background(), file, src, refs())
			switch {
			case (err == nil) != (wantErr == nil):
				t.Fatalf("%q: error %v, the YAML path's %v", src, err, wantErr)
			case err != nil && err.Error() != wantErr.Error():
				t.Fatalf("%q: errors\n%v\nthe YAML path's\n%v", src, err, wantErr)
			}
			if diff := cmp.Diff(want, got, ignorePos); diff != "" {
				t.Fatalf("%q: plan (-YAML path +Validate):\n%s", src, diff)
			}
		}
	})
}

// TestValidateJSON_MatchesYAML runs the seeds of FuzzValidateJSON_MatchesYAML, and each
// real plan's canonical JSON with one problem in it, which Validate places through the
// positions it computes on demand.
func TestValidateJSON_MatchesYAML(t *testing.T) {
	refused := 0
	for _, s := range realPlans(t) {
		for _, bad := range [][2]string{{`"subagent":"`, `"subagent":"missing-`}, {`"id":"`, `"id":"X `}, {`"depends_on":["`, `"depends_on":["zz`}} {
			src := regexp.MustCompile(regexp.QuoteMeta(bad[0])).ReplaceAll(s, []byte(bad[1]))
			refs := &fakeRefs{subagents: []string{"s", "fixer", "scribe"}, envs: []string{"base"}, targets: []string{"local"}}
			_, err := plan.Validate(context.Background(), "f.json", src, refs)
			_, wantErr := plan.ValidateYAML(context.Background(), "f.json", src, refs)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s: errors\n%v\nthe YAML path's\n%v", src, err, wantErr)
			}
			if err != nil {
				refused++
			}
		}
	}
	if refused < 10 {
		t.Errorf("only %d of the broken plans were refused; the replacements miss the seeds", refused)
	}
}
