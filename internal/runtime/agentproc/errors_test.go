package agentproc

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestNotFoundError(t *testing.T) {
	tests := []struct {
		name string
		err  *NotFoundError
		want string
	}{
		{"on PATH", &NotFoundError{Runtime: "codex", Name: "codex", PATH: "/usr/bin", Err: fs.ErrNotExist},
			`codex runtime: "codex" not found on PATH (PATH=/usr/bin)`},
		{"a path", &NotFoundError{Runtime: "claude-code", Name: "/opt/claude", Err: fs.ErrNotExist},
			`claude-code runtime: "/opt/claude" not found: file does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, fs.ErrNotExist) {
				t.Error("the cause is not unwrapped")
			}
		})
	}
}

func TestExitError(t *testing.T) {
	tests := []struct {
		name string
		err  *ExitError
		want string
	}{
		{"claude with a subtype", &ExitError{Runtime: "claude-code", CLI: "claude", ExitCode: 1, Subtype: "error_max_turns", Detail: "Reached maximum number of turns (2)"},
			"claude-code runtime: claude exited with code 1 (result error_max_turns): Reached maximum number of turns (2)"},
		{"codex killed", &ExitError{Runtime: "codex", CLI: "codex", ExitCode: -1},
			"codex runtime: codex exited with code -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStderr: the tail keeps the last bytes whatever else the stderr goes to.
func TestStderr(t *testing.T) {
	var also bytes.Buffer
	w, tail := Stderr(&also)
	long := strings.Repeat("x", stderrTail) + "the error"
	w.Write([]byte(long))
	if also.String() != long {
		t.Errorf("the other writer got %d bytes, want %d", also.Len(), len(long))
	}
	if got := tail.String(); len(got) != stderrTail || !strings.HasSuffix(got, "the error") {
		t.Errorf("tail of %d bytes ending %q, want %d ending in the error", len(got), got[len(got)-9:], stderrTail)
	}
	w, tail = Stderr(nil)
	w.Write([]byte("only"))
	if tail.String() != "only" {
		t.Errorf("tail %q, want only", tail.String())
	}
}

// TestStdinArgv: the prompt is a file the shell opens, never an argument of the CLI.
func TestStdinArgv(t *testing.T) {
	got := StdinArgv("codexrt", "/tmp/p", "/usr/bin/codex", "exec", "-")
	want := []string{"/bin/sh", "-c", `f=$1; shift; exec "$@" <"$f"`, "codexrt", "/tmp/p", "/usr/bin/codex", "exec", "-"}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("got %q, want %q", got, want)
	}
}
