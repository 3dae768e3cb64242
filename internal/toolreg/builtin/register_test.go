package builtin

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

// TestRegister_ExactSet pins the built-in tools to grant.BuiltinTools, the names a capability
// may grant.
func TestRegister_ExactSet(t *testing.T) {
	r := toolreg.NewRegistry()
	mustDo(t, Register(r, Env{Workspace: t.TempDir()}))
	v := r.For("d", testRole, grant.Set{Tools: grant.BuiltinTools}, &recorder{})
	var got []string
	readOnly := map[string]bool{}
	for _, info := range v.List() {
		got = append(got, info.Name)
		readOnly[info.Name] = info.ReadOnly
	}
	want := slices.Sorted(slices.Values(grant.BuiltinTools))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered tools (-want +got):\n%s", diff)
	}
	for _, name := range []string{"write_file", "run_command"} {
		if readOnly[name] {
			t.Errorf("%s is marked read-only", name)
		}
	}
	if err := Register(r, Env{Workspace: t.TempDir()}); !errors.Is(err, toolreg.ErrDuplicateTool) {
		t.Errorf("second Register: got %v, want ErrDuplicateTool", err)
	}
}

func TestRegister_RefusesRelativeWorkspace(t *testing.T) {
	for _, ws := range []string{"", "rel/ws", "."} {
		if err := Register(toolreg.NewRegistry(), Env{Workspace: ws}); err == nil {
			t.Errorf("Register with workspace %q succeeded", ws)
		}
	}
}

func TestAskHuman(t *testing.T) {
	f := newFixture(t, grant.Set{Tools: []string{"ask_human"}})
	_, err := f.call(t, "ask_human", map[string]any{"question": "Which database should the migration target?"})
	var ni *toolreg.NeedsInput
	if !errors.As(err, &ni) || ni.Question != "Which database should the migration target?" {
		t.Fatalf("got %v, want NeedsInput with the question", err)
	}
	f.wantDecision(t, "ask_human", toolreg.DecisionAllowed, toolreg.ReasonNeedsInput)

	_, err = f.call(t, "ask_human", map[string]any{"question": ""})
	var ae *toolreg.ArgsError
	if !errors.As(err, &ae) {
		t.Errorf("empty question: got %v, want ArgsError", err)
	}
}

// TestRedaction_PlantedSecretNeverAudited pushes a secret through every tool's arguments and
// error paths; the harness asserts no decision holds it, and the hash is of redacted args.
func TestRedaction_PlantedSecretNeverAudited(t *testing.T) {
	f := newFixture(t, grant.Set{Tools: grant.BuiltinTools, Commands: []string{"echo *"}, Egress: grant.MustEgressRules("api.example.com")})
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "notes.txt", "content": "key=" + planted}},
		{"write_file", map[string]any{"path": "../" + planted, "content": "x"}},
		{"read_file", map[string]any{"path": planted}},
		{"list_files", map[string]any{"path": planted}},
		{"search_files", map[string]any{"pattern": planted + "(", "path": "."}},
		{"run_command", map[string]any{"argv": []string{"echo", planted}}},
		{"run_command", map[string]any{"argv": []string{"cat", planted}}},
		{"http_fetch", map[string]any{"url": "https://x.invalid/" + planted}},
		{"ask_human", map[string]any{"question": "is " + planted + " right?"}},
		{"read_file", map[string]any{"path": "a", "extra": planted}},
		{"drop_table", map[string]any{"secret": planted}},
	}
	for _, c := range calls {
		_, _ = f.call(t, c.tool, c.args)
		if got, want := f.last(t).ArgsHash, argsHash(t, c.args); got != want {
			t.Errorf("%s: args hash %s, want the hash of the redacted args %s", c.tool, got, want)
		}
	}
	if n := len(f.rec.all()); n != len(calls) {
		t.Errorf("got %d decisions, want %d", n, len(calls))
	}
}
