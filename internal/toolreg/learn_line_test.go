package toolreg

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/shellwords"
)

// TestView_LearnCommandLineReadsBack (suggest): a would_deny's command line reads back as
// exactly the argv that ran. Joined with bare spaces, ["git", "status --exec=x"] read back as
// a three-word command that never ran, which `agora capability suggest` would have proposed.
// Failed before: the line was strings.Join(argv, " ").
func TestView_LearnCommandLineReadsBack(t *testing.T) {
	r := NewRegistry()
	schema := json.RawMessage(`{"type": "object", "description": "test", "additionalProperties": false,
		"properties": {"argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 8}}}`)
	mustRegister(t, r, Tool{Name: commandTool, Description: "t", Schema: schema, Handler: func(_ context.Context, c Call) (Result, error) {
		return Result{Content: "ran"}, nil
	}})
	a := &learnRecorder{}
	v := r.For("d1", testRole, grant.Set{Tools: []string{commandTool}}, a, WithLearn())
	for _, argv := range [][]string{
		{"git", "status --exec=x"},
		{"sh", "-c", "echo 'a b' | tr a b"},
		{"printf", "%s\n", "", "it's", "=x", "*"},
	} {
		args, _ := json.Marshal(map[string]any{"argv": argv})
		if _, err := v.Call(t.Context(), commandTool, args); err != nil {
			t.Fatal(err)
		}
		got, err := shellwords.Split(a.would[len(a.would)-1].Command)
		if err != nil || !slices.Equal(got, argv) {
			t.Errorf("line %q reads back as %q (%v), want %q", a.would[len(a.would)-1].Command, got, err, argv)
		}
	}
}
