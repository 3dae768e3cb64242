package dispatchcmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestRedTeam44G_ChangesFlagTakesEachGlobWhole: --changes is one glob per flag, never split:
// a brace's comma stays in its glob, a comma-separated list is refused or names one literal
// path (it admits no less than it says), and an empty glob or one that escapes the tree is a
// usage error.
func TestRedTeam44G_ChangesFlagTakesEachGlobWhole(t *testing.T) {
	for _, tt := range []struct {
		changes []string
		want    []string
		wantErr string
	}{
		{changes: []string{"src/{a,b}/**", "docs/**"}, want: []string{"src/{a,b}/**", "docs/**"}},
		{changes: []string{"{src,tests}/**"}, want: []string{"{src,tests}/**"}},
		{changes: []string{"src/*,tests/*"}, want: []string{"src/*,tests/*"}},
		{changes: []string{"src/**,tests/**"}, wantErr: "must be a whole segment"},
		{changes: []string{""}, wantErr: "empty pattern"},
		{changes: []string{"../**"}, wantErr: `".." segment`},
		{changes: []string{"src/**", "  "}, want: []string{"src/**", "  "}},
		{changes: []string{"src/{a,b"}, wantErr: "not closed"},
	} {
		args := []string{"--subagent", "s", "--verify", "true"}
		for _, c := range tt.changes {
			args = append(args, "--changes", c)
		}
		got, err := parseRun(args...)
		if tt.wantErr != "" {
			if _, usage := err.(*cmdutil.UsageError); !usage || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("--changes %q: Execute = %v, want a usage error containing %q", tt.changes, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("--changes %q: %v", tt.changes, err)
		}
		if diff := cmp.Diff(tt.want, got.req.Verify.Changes); diff != "" {
			t.Errorf("--changes %q (-want +got):\n%s", tt.changes, diff)
		}
	}
}
