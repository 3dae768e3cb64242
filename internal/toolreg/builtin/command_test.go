package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

func TestRunCommand(t *testing.T) {
	grants := grant.Set{
		Tools:    []string{"run_command"},
		Commands: []string{"echo *", "echo * *", "env", "pwd", "sleep *", "false", "./tool.sh", "no-such-program-xyz", "head -c * /dev/zero"},
	}
	f := newFixture(t, grants)
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "tool.sh"), []byte("#!/bin/sh\necho from script\n"), 0o755))
	t.Setenv("AGORA_TOOLREG_PARENT_ONLY", "must-not-leak")
	wsReal, err := filepath.EvalSymlinks(f.ws)
	mustDo(t, err)

	tests := []struct {
		name    string
		argv    []string
		timeout int
		want    string
		wantErr string
	}{
		{name: "granted echo", argv: []string{"echo", "hello"}, want: "hello\n\nexit code: 0"},
		{name: "no shell expansion", argv: []string{"echo", "$HOME", "*"}, want: "$HOME *\n\nexit code: 0"},
		{name: "whole environment is CommandEnv", argv: []string{"env"}, want: basePath + "\nLANG=C\n\nexit code: 0"},
		{name: "runs in the workspace", argv: []string{"pwd"}, want: wsReal + "\n\nexit code: 0"},
		{name: "nonzero exit is a result", argv: []string{"false"}, want: "\nexit code: 1"},
		{name: "relative program in the workspace", argv: []string{"./tool.sh"}, want: "from script\n\nexit code: 0"},
		{name: "program not found", argv: []string{"no-such-program-xyz"}, wantErr: "run_command: program not found in the command PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"argv": tt.argv}
			res, err := f.call(t, "run_command", args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %q, %v; want error %q", res.Content, err, tt.wantErr)
				}
				f.wantDecision(t, "run_command", toolreg.DecisionError, "tool error: "+tt.wantErr)
				return
			}
			mustDo(t, err)
			if res.Content != tt.want {
				t.Errorf("got %q, want %q", res.Content, tt.want)
			}
			f.wantDecision(t, "run_command", toolreg.DecisionAllowed, toolreg.ReasonGranted)
		})
	}

	t.Run("output capped", func(t *testing.T) {
		res, err := f.call(t, "run_command", map[string]any{"argv": []string{"head", "-c", "300000", "/dev/zero"}})
		mustDo(t, err)
		want := "\n[output truncated: " + itoa(300000-maxCommandOutput) + " more bytes]\nexit code: 0"
		if len(res.Content) != maxCommandOutput+len(want) || !strings.HasSuffix(res.Content, want) {
			t.Errorf("got %d bytes ending %q, want %d and %q", len(res.Content), res.Content[max(0, len(res.Content)-80):], maxCommandOutput, want)
		}
	})

	t.Run("timeout kills", func(t *testing.T) {
		start := time.Now()
		res, err := f.call(t, "run_command", map[string]any{"argv": []string{"sleep", "30"}, "timeout_seconds": 1})
		mustDo(t, err)
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("took %v, want the 1s budget enforced", el)
		}
		want := "\n[timed out after 1s; the process group was killed]\nexit code: -1"
		if res.Content != want {
			t.Errorf("got %q, want %q", res.Content, want)
		}
	})
}

func TestRunCommand_RefusesUngrantedArgv(t *testing.T) {
	f := newFixture(t, grant.Set{Tools: []string{"run_command"}, Commands: []string{"echo *"}})
	before := treeHash(t, filepath.Dir(f.ws))
	tests := []struct {
		name string
		argv []string
	}{
		{"shell not granted", []string{"sh", "-c", "echo pwned > pwned.txt"}},
		{"bash not granted", []string{"bash", "-c", "touch pwned.txt"}},
		{"too many arguments for the pattern", []string{"echo", "a", "b"}},
		{"program by another path", []string{"/bin/echo", "x"}},
		{"pattern word as argv", []string{"echo *"}},
		{"secret in argv", []string{"curl", "-H", "Authorization: " + planted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.call(t, "run_command", map[string]any{"argv": tt.argv})
			var de *toolreg.DeniedError
			if !errors.As(err, &de) || de.Reason != ReasonCommandNotGranted {
				t.Fatalf("got %v, want a refusal %q", err, ReasonCommandNotGranted)
			}
			want := `run_command: refused: command not granted; argv must match one of the granted patterns: "echo *"`
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			f.wantDecision(t, "run_command", toolreg.DecisionDenied, ReasonCommandNotGranted)
		})
	}
	if treeHash(t, filepath.Dir(f.ws)) != before {
		t.Error("a refused command changed the workspace")
	}

	t.Run("no commands granted", func(t *testing.T) {
		f.grant(t, grant.Set{Tools: []string{"run_command"}})
		_, err := f.call(t, "run_command", map[string]any{"argv": []string{"echo", "x"}})
		if err == nil || err.Error() != "run_command: refused: command not granted; no commands are granted" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("a shell runs only when a pattern names it", func(t *testing.T) {
		f.grant(t, grant.Set{Tools: []string{"run_command"}, Commands: []string{"sh -c *"}})
		res, err := f.call(t, "run_command", map[string]any{"argv": []string{"sh", "-c", "echo $((6*7))"}})
		mustDo(t, err)
		if res.Content != "42\n\nexit code: 0" {
			t.Errorf("got %q", res.Content)
		}
	})
}
