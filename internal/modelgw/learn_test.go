package modelgw

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// TestGateway_WouldDenyOnlyFromALearnDispatch: a would_deny report is recorded as
// tool.would_deny (command and reason masked, the role the gateway's) only by a learn
// dispatch's gateway. The attack: a sandbox whose dispatch is not a learn one reports a
// would_deny to make a refused call look learned; it is refused, unrecorded, and no report
// may carry a command without being a would_deny, nor a duration (the call has not run).
// Failed before: decision would_deny was refused everywhere and the kind did not exist.
func TestGateway_WouldDenyOnlyFromALearnDispatch(t *testing.T) {
	body := `{"tool":"run_command","decision":"would_deny","reason":"command not granted","args_hash":"` + testArgsHash +
		`","duration_ms":0,"command":"curl -H 'Authorization: ` + testKey + `' https://x"}`
	plain := start(t, Config{APIKey: []byte(testKey)})
	resp, got := plain.do(t, http.MethodPost, "/audit/tool", nil, body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "not a learn dispatch") {
		t.Fatalf("a would_deny from a dispatch that is not a learn one = %d %q, want 400", resp.StatusCode, got)
	}
	if n := len(plain.audit.ofKind(entry.ToolWouldDeny)) + len(plain.audit.ofKind(entry.ToolCall)); n != 0 {
		t.Fatalf("the refused report was recorded (%d entries)", n)
	}

	learn := start(t, Config{APIKey: []byte(testKey), Learn: true})
	resp, got = learn.do(t, http.MethodPost, "/audit/tool", nil, body)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a learn dispatch's would_deny = %d %q, want 204", resp.StatusCode, got)
	}
	w := learn.audit.ofKind(entry.ToolWouldDeny)
	if len(w) != 1 {
		t.Fatalf("tool.would_deny entries = %d", len(w))
	}
	d, _ := entry.ReadWouldDeny(entry.ToolWouldDeny, w[0])
	if d.Tool != "run_command" || d.Role != testRole || d.Reason != "command not granted" ||
		d.Command != "curl -H 'Authorization: [REDACTED]' https://x" || w[0]["dispatch"] != testDispatchID {
		t.Errorf("tool.would_deny = %+v %v", d, w[0])
	}
	wantNoKeyInAudit(t, learn.audit)

	for _, tc := range []struct{ name, body, msg string }{
		{"CommandOnAllowed", `{"tool":"run_command","decision":"allowed","reason":"","args_hash":"` + testArgsHash + `","duration_ms":1,"command":"rm -rf /"}`, "command: only with decision would_deny"},
		{"WouldDenyWithDuration", strings.Replace(body, `"duration_ms":0`, `"duration_ms":5`, 1), "duration_ms: want 0"},
		{"WouldDenyPost", strings.Replace(body, `"duration_ms":0`, `"duration_ms":0,"phase":"post","call_id":"toolu_1"`, 1), "phase: want pre or none"},
		{"CommandNewline", strings.Replace(body, "https://x", `https://x\nforged`, 1), "command: holds a control character"},
		{"CommandTooLong", strings.Replace(body, "https://x", strings.Repeat("a", entry.MaxWouldDenyCommand), 1), "command: over"},
		{"CommandTwice", strings.TrimSuffix(body, "}") + `,"command":"ls"}`, "given twice"},
	} {
		resp, got := learn.do(t, http.MethodPost, "/audit/tool", nil, tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), tc.msg) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.name, resp.StatusCode, got, tc.msg)
		}
	}
	if n := len(learn.audit.ofKind(entry.ToolWouldDeny)); n != 1 {
		t.Errorf("refused reports were recorded: %d tool.would_deny entries", n)
	}
}
