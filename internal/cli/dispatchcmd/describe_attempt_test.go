package dispatchcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
)

// TestDescribe_RunAttemptSaysWhatToDo: describe of a run's attempt says what it is and how it
// is answered or cancelled, never a past event ("answered and cancelled") it did not go
// through; the MCP refusal says the same. Failed before: "(answered and cancelled through the
// run)" of an attempt that was neither.
func TestDescribe_RunAttemptSaysWhatToDo(t *testing.T) {
	r := &dispatch.Record{ID: "d-1", Subagent: "s", RunID: "r-1", TaskID: "build"}
	var b bytes.Buffer
	printRecord(&b, r)
	out := b.String()
	if want := "run:       r-1, task build (an attempt of that task: answer or cancel it through the run)\n"; !strings.Contains(out, want) {
		t.Errorf("describe says\n%s\nwant the line %q", out, want)
	}
	err := dispatch.MCPReadOnly(r)
	if err == nil {
		t.Fatal("a run's attempt is not read-only over MCP")
	}
	for _, text := range []string{out, err.Error()} {
		if strings.Contains(text, "answered and cancelled") || strings.Contains(text, "are answered") {
			t.Errorf("reads like a past event: %q", text)
		}
	}
	if !strings.Contains(err.Error(), "answer or cancel it through the run") {
		t.Errorf("MCP refusal %q", err)
	}
}
