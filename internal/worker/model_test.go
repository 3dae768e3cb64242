package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/agentrun/agentruntest"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/toolreg"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// memAuditor keeps the gateway's records.
type memAuditor = agentruntest.Auditor

// These tests run the worker without a sandbox against the real gateway (the host side,
// imported by tests only) and a scripted model; internal/dispatch runs the same in bubblewrap.

// modelFixture is a fixture of the openai runtime holding tools, with the gateway of the
// layout running against the scripted model srv.
func modelFixture(t *testing.T, tools []string, a *memAuditor, script ...openaitest.Step) (*fixture, *openaitest.Server) {
	t.Helper()
	srv := openaitest.New(t, script...)
	f := newFixture(t, "")
	f.runtime, f.model, f.command = "openai", "test-model", nil
	f.caps[0].yaml = "tools: [" + strings.Join(tools, ", ") + "]\n"
	f.man.Grants.Tools = tools
	f.man.Grants.Commands = []string{}
	f.write()
	if err := os.MkdirAll(filepath.Join(f.root, wire.GatewayDir), 0o700); err != nil {
		t.Fatal(err)
	}
	gw, err := modelgw.Listen(t.Context(), filepath.Join(f.root, wire.GatewayDir, wire.GatewaySocket), modelgw.Config{
		DispatchID:   f.man.DispatchID,
		Role:         f.man.Subagent.Name + "@" + string(f.man.Subagent.Digest),
		ModelBaseURL: srv.URL(),
		Dialer:       egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:        a,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return f, srv
}

// TestOpenAI_AuditFailureFailsClosed: a tool decision the audit log did not keep fails the
// call and stops the loop; the model never gets the result.
func TestOpenAI_AuditFailureFailsClosed(t *testing.T) {
	a := &memAuditor{FailKind: entry.ToolCall}
	f, srv := modelFixture(t, []string{"list_files"}, a, openaitest.CallTool("list_files", "{}"), openaitest.Say("unreachable"))
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(res.Detail, "tool call not audited") {
		t.Fatalf("got %s %s: %s, want failed worker-failed: tool call not audited", res.Status, res.Reason, res.Detail)
	}
	if n := len(srv.Accepted()); n != 1 {
		t.Errorf("the model got %d requests, want 1: the loop stops at the unaudited call", n)
	}
	if exists(f.outPath(wire.OutputsDir, wire.FinalFile)) {
		t.Error("final.md written for a stopped loop")
	}
}

// TestOpenAI_AskHuman: ask_human ends the dispatch in needs_input with the model's question.
func TestOpenAI_AskHuman(t *testing.T) {
	a := &memAuditor{}
	f, _ := modelFixture(t, []string{"ask_human", "read_file"}, a,
		openaitest.CallTool("ask_human", `{"question":"Ship it on Friday?"}`))
	_, res := f.run()
	if res.Status != wire.StatusNeedsInput || res.NeedsInput == nil || res.NeedsInput.Question != "Ship it on Friday?" {
		t.Fatalf("got %s %s: %s (%+v), want needs_input with the question", res.Status, res.Reason, res.Detail, res.NeedsInput)
	}
	if diff := cmp.Diff([]string{"ask_human allowed " + toolreg.ReasonNeedsInput}, a.ToolCalls()); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
	tr := readFile(t, f.outPath(wire.TranscriptFile))
	if !strings.Contains(tr, `"type":"needs_input"`) {
		t.Errorf("transcript lacks the question:\n%s", tr)
	}
}

// TestOpenAI_FinalIsAnOutput: the model's answer becomes outputs/final.md, replacing a
// symlink the agent could have planted there, never writing through it.
func TestOpenAI_FinalIsAnOutput(t *testing.T) {
	a := &memAuditor{}
	f, _ := modelFixture(t, []string{"read_file"}, a, openaitest.Say("all good"))
	outside := filepath.Join(t.TempDir(), "outside.md")
	if err := os.MkdirAll(f.outPath(wire.OutputsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, f.outPath(wire.OutputsDir, wire.FinalFile)); err != nil {
		t.Fatal(err)
	}
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %s %s: %s", res.Status, res.Reason, res.Detail)
	}
	if got := readFile(t, f.outPath(wire.OutputsDir, wire.FinalFile)); got != "all good" {
		t.Errorf("final.md = %q", got)
	}
	if exists(outside) {
		t.Error("final.md was written through a symlink")
	}
	if len(res.Outputs) != 1 || res.Outputs[0].Path != "outputs/final.md" {
		t.Errorf("outputs %+v, want final.md", res.Outputs)
	}
}

func TestUserPrompt(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"Empty", "", "{}"},
		{"Prompt", `{"prompt":"review it","n":1}`, "review it"},
		{"NoPrompt", `{"task":"greet"}`, `{"task":"greet"}`},
		{"PromptNotString", `{"prompt":{"a":1}}`, `{"prompt":{"a":1}}`},
		{"Resumed", `{"prompt":"fix it","agora_resume":{"question":"Which file?","answer":"a.go"}}`,
			"fix it\n\nYou asked a person: Which file?\nTheir answer: a.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := userPrompt(tc.input); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAuditFields(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"read_file", "read_file"},
		{"mcp__docs__search", "mcp__docs__search"},
		{"Bash", "Bash"},
		{"../etc", "invalid_tool_name"},
		{"", "invalid_tool_name"},
		{"9lives", "invalid_tool_name"},
		{strings.Repeat("a", 129), "invalid_tool_name"},
	} {
		if got := agentrun.AuditToolName(tc.in); got != tc.want {
			t.Errorf("auditToolName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := agentrun.OneLine("tool error: a\nb\x00c\xff", 512); got != "tool error: a b c\uFFFD" {
		t.Errorf("oneLine = %q", got)
	}
	if got := agentrun.OneLine(strings.Repeat("é", 300), 511); len(got) > 511 || !strings.HasSuffix(got, "é") {
		t.Errorf("oneLine cut %d bytes, want at most 511 on a rune boundary", len(got))
	}
}

func TestTranscriptFile_Capped(t *testing.T) {
	dir := t.TempDir()
	r := &runner{out: dir, transcript: &agentrun.Transcript{}}
	tr, err := agentrun.Invocation{Transcript: r.transcript}.OpenTranscript()
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 1<<20-1) + "\n")
	for range wire.MaxTranscript/len(line) + 3 {
		if n, err := tr.Write(line); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v; want every write to succeed", n, err)
		}
	}
	var msg strings.Builder
	tr.Close(&msg)
	// Nothing is in out/ until the worker keeps it (after stop), with its hash declared.
	if _, err := os.Lstat(filepath.Join(dir, wire.TranscriptFile)); err == nil {
		t.Fatal("the transcript reached out/ before the stop step")
	}
	// A file the agent put there meanwhile is replaced, never appended to or declared.
	if err := os.WriteFile(filepath.Join(dir, wire.TranscriptFile), []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fl := r.keepTranscript(); fl != nil {
		t.Fatal(fl.detail)
	}
	b, err := os.ReadFile(filepath.Join(dir, wire.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > wire.MaxTranscript || len(b)%len(line) != 0 || strings.Contains(string(b), "forged") {
		t.Errorf("transcript is %d bytes, want whole lines of the runtime within %d", len(b), wire.MaxTranscript)
	}
	sum := sha256.Sum256(b)
	if d := r.res.Transcript; d == nil || d.SHA256 != hex.EncodeToString(sum[:]) || d.Size != int64(len(b)) {
		t.Errorf("declared %+v, want the kept bytes' size and hash", d)
	}
	if !strings.Contains(msg.String(), "dropped") {
		t.Errorf("close said %q, want the dropped bytes reported", msg.String())
	}
}
