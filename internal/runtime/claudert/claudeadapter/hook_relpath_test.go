package claudeadapter

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestCallHash_RelativePathAsTheHookSeesIt: claude prints a Write's relative path as the
// model gave it and hands its hook the path made absolute against its cwd. Both views must
// hash alike, or every claude dispatch that writes a relative path stopped as if a report
// named another call (found by learn3).
func TestCallHash_RelativePathAsTheHookSeesIt(t *testing.T) {
	red := redact.New(nil)
	const ws = "/agora/workspace"
	printed := json.RawMessage(`{"file_path":"notes/a.md","content":"x"}`)
	hooked := json.RawMessage(`{"content":"x","file_path":"/agora/workspace/notes/a.md"}`)
	for _, tool := range []string{"Write", "Edit", "MultiEdit", "Read"} {
		if callHash(red, tool, printed, ws) != callHash(red, tool, hooked, ws) {
			t.Errorf("%s: a relative path and the hook's absolute one hash apart", tool)
		}
	}
	nb := json.RawMessage(`{"notebook_path":"n.ipynb","new_source":"x"}`)
	if callHash(red, "NotebookEdit", nb, ws) != callHash(red, "NotebookEdit", json.RawMessage(`{"notebook_path":"/agora/workspace/n.ipynb","new_source":"x"}`), ws) {
		t.Error("NotebookEdit: a relative path and the hook's absolute one hash apart")
	}
	for name, other := range map[string]json.RawMessage{
		"another file":      json.RawMessage(`{"content":"x","file_path":"/agora/workspace/notes/b.md"}`),
		"another directory": json.RawMessage(`{"content":"x","file_path":"/agora/workspace/sub/notes/a.md"}`),
		"other content":     json.RawMessage(`{"content":"y","file_path":"/agora/workspace/notes/a.md"}`),
		"climbing out":      json.RawMessage(`{"content":"x","file_path":"/agora/notes/a.md"}`),
	} {
		if callHash(red, "Write", printed, ws) == callHash(red, "Write", other, ws) {
			t.Errorf("%s: hashes like the printed call", name)
		}
	}
	// Not a file tool, or input that is not one strict object: hashed as given.
	bash := json.RawMessage(`{"command":"ls"}`)
	if callHash(red, "Bash", bash, ws) != agentrun.ArgsHash(red, bash) {
		t.Error("Bash input changed by the path join")
	}
	dup := json.RawMessage(`{"file_path":"a","file_path":"/etc/passwd"}`)
	if callHash(red, "Write", dup, ws) != agentrun.ArgsHash(red, dup) {
		t.Error("a duplicate key was rewritten instead of hashed as given")
	}
}
