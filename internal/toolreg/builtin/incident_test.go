package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

// TestIncident_ValidatorCannotMutate replays the seed's RBAC incident: a validation agent
// whose capability grants only read tools asks for write_file and run_command. Both are
// refused with ToolNotPermitted naming its role and the tool, both are audited as denials
// with its role, and the workspace is byte-for-byte unchanged.
func TestIncident_ValidatorCannotMutate(t *testing.T) {
	const validator = "validator@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	grants := grant.Set{
		Tools: []string{"read_file", "list_files", "search_files"},
		// Even a command grant does not open run_command: the tool grant is the gate.
		Commands: []string{"sh -c *"},
	}
	f := newFixture(t, grant.Set{})
	f.role = validator
	f.grant(t, grants)

	var listed []string
	for _, info := range f.view.List() {
		listed = append(listed, info.Name)
	}
	if diff := cmp.Diff([]string{"list_files", "read_file", "search_files"}, listed); diff != "" {
		t.Fatalf("validator's tools (-want +got):\n%s", diff)
	}
	before := treeHash(t, filepath.Dir(f.ws))

	// A legitimate read goes through and is attributed.
	if _, err := f.call(t, "read_file", map[string]any{"path": "README.md"}); err != nil {
		t.Fatalf("read_file: %v", err)
	}
	f.wantDecision(t, "read_file", toolreg.DecisionAllowed, toolreg.ReasonGranted)

	attempts := []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "schema.sql", "content": "ALTER TABLE users DROP COLUMN email;"}},
		{"run_command", map[string]any{"argv": []string{"sh", "-c", "echo applied > migration.log"}}},
	}
	for _, a := range attempts {
		t.Run(a.tool, func(t *testing.T) {
			_, err := f.call(t, a.tool, a.args)
			var tnp *toolreg.ToolNotPermitted
			if !errors.As(err, &tnp) {
				t.Fatalf("got %v, want *toolreg.ToolNotPermitted", err)
			}
			if tnp.Role != validator || tnp.Tool != a.tool {
				t.Errorf("refusal names role %q tool %q, want %q %q", tnp.Role, tnp.Tool, validator, a.tool)
			}
			want := `tool "` + a.tool + `" is not permitted for role "` + validator + `"`
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			d := f.last(t)
			wantD := toolreg.Decision{DispatchID: testDispatch, Role: validator, Tool: a.tool,
				Decision: toolreg.DecisionDenied, Reason: toolreg.ReasonNotGranted, ArgsHash: argsHash(t, a.args)}
			d.Duration = 0
			if diff := cmp.Diff(wantD, d); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
	if after := treeHash(t, filepath.Dir(f.ws)); after != before {
		t.Error("the workspace changed")
	}
	for _, name := range []string{"schema.sql", "migration.log"} {
		if _, err := os.Lstat(filepath.Join(f.ws, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (err %v)", name, err)
		}
	}
	if n := len(f.rec.all()); n != 3 {
		t.Errorf("got %d audit decisions, want 3 (one read, two denials)", n)
	}
}
