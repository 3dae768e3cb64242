package capability

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// TestPrintSuggestion_HostileEvidence: what an agent put in the evidence (newlines, ANSI and
// OSC escapes, bidi overrides, NULs) reaches the terminal as plain ASCII, one item a line.
func TestPrintSuggestion_HostileEvidence(t *testing.T) {
	ev := suggest.NewEvidence()
	d := ev.Dispatch("d-1\x1b[2J", grant.Set{}, []string{"sh", "/x\n+ runs `rm -rf /`"})
	d.Learn = true // its would_denies are a learn dispatch's
	for _, e := range []struct {
		kind    string
		details map[string]any
	}{
		{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "run_command", entry.KeyCommand: "echo '\x1b]0;owned\x07'"}},
		{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "evil\u202etool", entry.KeyCommand: "ls"}},
		{entry.NetWouldDeny, map[string]any{entry.KeyHost: "a.example\n  + connects to evil", entry.KeyPort: int64(443)}},
		{entry.FileWouldDeny, map[string]any{entry.KeyPath: "etc/\x00passwd\r\n", entry.KeyOp: "write\x1b[31m"}},
		{entry.NetRequest, map[string]any{entry.KeyHost: "ok.example", entry.KeyPort: int64(443), entry.KeyMethod: "GET", entry.KeyPath: "/a\x1b[1m"}},
		{entry.NetRequest, map[string]any{entry.KeyHost: "ok.example", entry.KeyPort: int64(443), entry.KeyMethod: "GET", entry.KeyPath: "/caf\u00e9"}},
		{entry.NetConnect, map[string]any{entry.KeyHost: "api.github.com.exfil.example\n  + connects to evil\u202e", entry.KeyPort: int64(443),
			entry.KeyDecision: "deny", entry.KeyReason: "not in the grant\x1b[2J"}},
	} {
		d.Entry(e.kind, e.details)
	}
	p, err := suggest.Propose(ev, grant.Set{}, suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printSuggestion(&b, capabilitySuggestResult{Subagent: "s\x1b[0m", Proposal: p, Unended: []string{"d-1\x1b[2J"}})
	out := b.Bytes()
	for i, c := range out {
		if (c < ' ' && c != '\n') || c >= 0x7f {
			t.Fatalf("byte %d is %#x in:\n%s", i, c, out)
		}
	}
	// The new items are the tool the hostile command was reported under and the one plain
	// command (an unknown tool's command is still a command), with their diff lines.
	var plus []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "+") {
			plus = append(plus, l)
		}
	}
	if want := []string{"  + uses the tool run_command", "  + runs `ls`", "  + tools: run_command", `  + commands: "ls"`}; !slices.Equal(plus, want) {
		t.Errorf("added lines %q, want %q:\n%s", plus, want, out)
	}
	if len(p.Refused) != 5 || len(p.ProxyRefused) != 3 {
		t.Errorf("refused %d and %d by the proxy, want 5 and 3:\n%s", len(p.Refused), len(p.ProxyRefused), out)
	}
	head, rest, _ := strings.Cut(string(out), "not proposed: the agent tried it, the proxy refused it:\n")
	apart, _, _ := strings.Cut(rest, "not proposed:\n")
	if strings.Contains(head, "exfil") || !strings.Contains(apart, `  - egress "api.github.com.exfil.example\n  + connects to evil\u202e:443": the egress proxy refused it: not in the grant?[2J`) {
		t.Errorf("the proxy's refusals are not listed apart, quoted:\n%s", out)
	}
}

// TestCapabilitySuggestJSON_Fields pins the -o json document's fields: fields are added, never
// renamed, and lists are [] (never null) even when empty.
func TestCapabilitySuggestJSON_Fields(t *testing.T) {
	p, err := suggest.Propose(suggest.NewEvidence(), grant.Set{}, suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(capabilitySuggestResult{Subagent: "s", Proposal: p, Unended: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{"capability_yaml", "diff", "dispatches", "entries", "grant", "items", "notes", "proxy_refused", "refused", "subagent", "unended"}
	if got := slices.Sorted(maps.Keys(doc)); !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
	for _, k := range []string{"items", "notes", "proxy_refused", "refused", "unended"} {
		if string(doc[k]) != "[]" {
			t.Errorf("%s = %s, want []", k, doc[k])
		}
	}
	if d := string(doc["diff"]); d != `{"added":[],"removed":[]}` {
		t.Errorf("diff = %s", d)
	}
}
