package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// An unknown command is a wrong command line: exit 2 with the usage hint, like every other
// usage error, and nothing written to AGORA_HOME.
func TestRun_UnknownCommandIsUsage(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"dispatch", "bogus"}} {
		var errOut bytes.Buffer
		home := t.TempDir() + "/home"
		f := cli.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut},
			func(k string) string {
				if k == "AGORA_HOME" {
					return home
				}
				return ""
			})
		code := cli.Run(t.Context(), f, args)
		f.Close()
		if code != cmdutil.ExitUsage {
			t.Errorf("agora %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, cmdutil.ExitUsage, errOut.String())
		}
		if !strings.Contains(errOut.String(), "--help' for usage") {
			t.Errorf("agora %s: no usage hint in:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
}

// TestRun_UnknownCommandSuggests: a misspelt command exits 2 and names the command it was
// probably meant to be, as cobra suggests it (two edits or a prefix); a word like nothing
// gets no suggestion. The suggestion is a hint line, never part of the error.
func TestRun_UnknownCommandSuggests(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		suggest string // "" means no "did you mean" line
	}{
		{"RootTypo", []string{"verison"}, "agora: hint: did you mean 'agora version'?"},
		{"RootBogus", []string{"bogus"}, ""},
		{"GroupTypo", []string{"dispatch", "rnu"}, "agora: hint: did you mean 'agora dispatch run'?"},
		// cobra's distance: bogus is two edits from logs.
		{"GroupBogus", []string{"dispatch", "bogus"}, "agora: hint: did you mean 'agora dispatch logs'?"},
		{"GroupNothingLike", []string{"dispatch", "zzzzzz"}, ""},
		{"NestedTypo", []string{"orch", "stauts"}, "agora: hint: did you mean 'agora orch status'?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"AGORA_HOME": t.TempDir() + "/home"}
			r := runAgora(t, env, tt.args...)
			if r.code != cmdutil.ExitUsage {
				t.Fatalf("exit %d, want %d\n%s", r.code, cmdutil.ExitUsage, r.stderr)
			}
			first := strings.SplitN(r.stderr, "\n", 2)[0]
			if want := "agora: error: unknown command \"" + tt.args[len(tt.args)-1] + "\""; !strings.HasPrefix(first, want) {
				t.Errorf("first line %q, want it to start %q", first, want)
			}
			if strings.Contains(r.stderr, "Did you mean") {
				t.Errorf("cobra's own suggestion block leaked into the error:\n%s", r.stderr)
			}
			if got := strings.Contains(r.stderr, "did you mean"); got != (tt.suggest != "") || tt.suggest != "" && !strings.Contains(r.stderr, tt.suggest+"\n") {
				t.Errorf("stderr:\n%s\nwant suggestion %q", r.stderr, tt.suggest)
			}
		})
	}
}
