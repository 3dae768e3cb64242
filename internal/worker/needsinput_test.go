package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

func TestWorker_NeedsInput(t *testing.T) {
	big := func(n int) string { return strings.Repeat("a", n) }
	many := make([]string, wire.MaxOptions+1)
	for i := range many {
		many[i] = "o"
	}
	tests := []struct {
		name    string
		content string // written to out/needs_input.json; "" = written by the script itself
		script  string
		want    *wire.NeedsInput
		exit    int
		detail  string
	}{
		{name: "valid, exit 0", content: `{"question":"Which database?","options":["pg","sqlite"],"partial_state":{ "step" : 2 }}`,
			want: &wire.NeedsInput{Question: "Which database?", Options: []string{"pg", "sqlite"}, PartialState: json.RawMessage(`{"step":2}`)}},
		{name: "valid, non-zero exit", content: `{"question":"Go on?"}`, exit: 1,
			want: &wire.NeedsInput{Question: "Go on?"}},
		{name: "invalid JSON", content: `{"question":`, detail: "needs_input"},
		{name: "question missing", content: `{"options":["a"]}`, detail: "question is required"},
		{name: "unknown field", content: `{"question":"q","context":"x"}`, detail: `unknown field "context"`},
		{name: "question too long", content: `{"question":"` + big(wire.MaxQuestion+1) + `"}`, detail: "question is 8193 bytes"},
		{name: "too many options", content: `{"question":"q","options":` + mustJSON(t, many) + `}`, detail: "21 options"},
		{name: "partial state too large", content: `{"question":"q","partial_state":"` + big(wire.MaxPartialState) + `"}`, detail: "partial_state is"},
		{name: "symlink", script: `ln -s /etc/hostname "$AGORA_OUT/needs_input.json"`, detail: "a symlink is on the path"},
		{name: "fifo", script: `mkfifo "$AGORA_OUT/needs_input.json"`, detail: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "ni.json")
			if err := os.WriteFile(src, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			script := tt.script
			if script == "" {
				script = `cp ` + src + ` "$AGORA_OUT/needs_input.json"`
			}
			script += `; echo partial > partial.txt; exit ` + mustJSON(t, tt.exit)
			f := newFixture(t, script)
			f.write()
			_, res := f.run()
			if res.ExitCode != tt.exit {
				t.Errorf("exit code %d, want %d", res.ExitCode, tt.exit)
			}
			if tt.want != nil {
				if res.Status != wire.StatusNeedsInput || res.Reason != "" {
					t.Fatalf("got %q %q %q, want needs_input", res.Status, res.Reason, res.Detail)
				}
				if diff := cmp.Diff(tt.want, res.NeedsInput); diff != "" {
					t.Errorf("needs_input (-want +got):\n%s", diff)
				}
			} else {
				if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || res.NeedsInput != nil {
					t.Fatalf("got %q %q %q, want failed worker-failed", res.Status, res.Reason, res.Detail)
				}
				if !strings.Contains(res.Detail, tt.detail) {
					t.Errorf("detail %q does not contain %q", res.Detail, tt.detail)
				}
			}
			// Either way the work so far is captured.
			if res.Patch == nil || res.Patch.FilesChanged != 1 {
				t.Errorf("patch %+v, want partial.txt", res.Patch)
			}
		})
	}
}
