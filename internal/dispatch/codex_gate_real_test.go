package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// codexGateHome is an agora home with the real Codex CLI and one codex subagent per grant.
type codexGateHome struct {
	*cliHome
	t   *testing.T
	key string
	n   int // env bundles registered, one per dispatch
	// repo, when set, is the repository each dispatch checks out (--repo); else none.
	repo string
	// learn makes each dispatch a learn dispatch (--learn).
	learn bool
}

func newCodexGateHome(t *testing.T) *codexGateHome {
	t.Helper()
	codex := realCodexCLI()
	if codex == "" {
		t.Skip("SKIP: the real Codex CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CODEX)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "codex", codex)
	if err != nil {
		t.Fatalf("resolve the real codex: %v", err)
	}
	const key = "sk-proj-e2e-codex-gate-0123456789abcdef"
	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"OPENAI_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  codex: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, yaml := range map[string]string{
		"status-only": "tools: [run_command]\ncommands: [\"git status\"]\n",
		"any-script":  "tools: [run_command]\ncommands: [\"bash -lc *\"]\n",
		"printf-only": "tools: [run_command]\ncommands: [\"printf **\", \"cat **\"]\n",
	} {
		capDir := filepath.Join(dir, "caps", name)
		if err := os.MkdirAll(capDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		h.agora("capability", "register", name, "--from", capDir)
		h.agora("subagent", "register", name, "--runtime", "codex", "--model", "gpt-5.5",
			"--system-prompt", "You run commands.", "--capability", name)
	}
	return &codexGateHome{cliHome: h, t: t, key: key}
}

// codexOutcome is what one dispatch left: its record, its patch and its tool.call entries.
type codexOutcome struct {
	id      string
	rec     codexDescribe
	patch   string
	entries []map[string]any
}

// run dispatches subagent against a Responses fake answering replies, then reads back what
// the dispatch left.
func (h *codexGateHome) run(subagent string, replies ...responsestest.Reply) codexOutcome {
	h.t.Helper()
	return h.runScript(subagent, responsestest.Turns(replies...))
}

// runScript is run with a model that answers by script (one that reads what codex sent).
func (h *codexGateHome) runScript(subagent string, script responsestest.Script) codexOutcome {
	t := h.t
	t.Helper()
	srv, err := responsestest.Start(h.key, script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h.n++
	env := fmt.Sprintf("model-%d", h.n)
	h.agora("env", "register", env, "--value", "OPENAI_BASE_URL="+srv.URL, "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY")
	args := []string{"dispatch", "run", "--subagent", subagent, "--env", env, "--input", `{"prompt":"go"}`}
	if h.repo != "" {
		args = append(args, "--repo", h.repo)
	}
	if h.learn {
		args = append(args, "--learn")
	}
	c := exec.Command(agoraBin, args...)
	c.Env = append(append(os.Environ(), h.env...), "AGORA_HOME="+h.dir)
	o, _ := c.Output() // a failed dispatch exits non-zero; its id is still the first line
	var out codexOutcome
	out.id, _, _ = strings.Cut(strings.TrimSpace(string(o)), "\n")
	if err := json.Unmarshal([]byte(h.agora("dispatch", "describe", out.id, "-o", "json")), &out.rec); err != nil {
		t.Fatalf("describe %s: %v", out.id, err)
	}
	out.patch = h.agora("dispatch", "patch", out.id)
	for _, e := range h.toolCalls() {
		if e["dispatch"] == out.id {
			out.entries = append(out.entries, e)
		}
	}
	return out
}

// toolCalls returns the details of every tool.call entry of the home's audit log.
func (h *codexGateHome) toolCalls() []map[string]any {
	var entries []struct {
		Details map[string]any `json:"details"`
	}
	logOut := h.agora("audit", "log", "--kind", "tool.call", "-o", "json")
	if err := json.Unmarshal([]byte(logOut), &entries); err != nil {
		var wrapped struct {
			Entries json.RawMessage `json:"entries"`
		}
		if json.Unmarshal([]byte(logOut), &wrapped) != nil || json.Unmarshal(wrapped.Entries, &entries) != nil {
			h.t.Fatalf("audit log: %v\n%s", err, logOut)
		}
	}
	out := make([]map[string]any, len(entries))
	for i, e := range entries {
		out[i] = e.Details
	}
	return out
}

// decisions lists an outcome's entries as "tool decision", in the log's order.
func (o codexOutcome) decisions() []string {
	var out []string
	for _, e := range o.entries {
		out = append(out, fmt.Sprint(e["tool"], " ", e["decision"]))
	}
	return out
}

// sameDecisions tells whether got holds the decisions of want, in any order. Two calls'
// entries come from two paths that race: the relay's gate records a refusal when the model's
// answer arrives, and an action codex took is recorded allowed when its event is read from
// codex's output, which a loaded machine can read after codex has already asked for its next
// turn. What the log promises is each call's decision, not the order of two calls' records.
func sameDecisions(got []string, want ...string) bool {
	return len(got) == len(want) && slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// rewriteCall returns a Rewrite that hides a call the way a hostile model would: in the
// response.output_item.done event (which Codex acts on) and in response.completed (which
// repeats the call, and which the gate before the fix also checked), each replacement's old
// text becomes its new text.
func rewriteCall(done, completed [2]string) func(string) string {
	return func(d string) string {
		switch {
		case strings.Contains(d, `"type":"response.output_item.done"`):
			return strings.Replace(d, done[0], done[1], 1)
		case strings.Contains(d, `"type":"response.completed"`):
			return strings.Replace(d, completed[0], completed[1], 1)
		}
		return d
	}
}

// TestCodexGate_DuplicateKeys_RealCLI, end to end, with the real Codex CLI in
// bubblewrap through `agora dispatch run`: grant "git status", and a model whose one call says
// "echo PWNED > pwned.txt" to Codex and something harmless to a reader that folds case or
// keeps the last duplicate (cmd/Cmd in the arguments; name/Name, type/Type, item/Item in the
// event). Each dispatch fails saying the answer could not be read exactly, pwned.txt is in no
// patch, the one tool.call entry is the refusal (denied: nothing ran) with why, and the
// exported bundle of those entries verifies. Before the fix pwned.txt was in the patch and the
// log said "exec_command denied" for the command that had run, and verify passed that log.
func TestCodexGate_DuplicateKeys_RealCLI(t *testing.T) {
	t.Parallel() // mostly waiting on a real agent CLI, in a home of its own: beside the other such tests
	h := newCodexGateHome(t)
	pwn := `{"cmd":"echo PWNED > pwned.txt"}`
	call := func(args string, rewrite func(string) string) responsestest.Reply {
		return responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: args}}, Rewrite: rewrite}
	}
	for _, tc := range []struct {
		name  string
		reply responsestest.Reply
	}{
		{"cmd and Cmd", call(`{"cmd":"echo PWNED > pwned.txt","Cmd":"git status"}`, nil)},
		{"name and Name", call(pwn, rewriteCall(
			[2]string{`"name":"exec_command"`, `"name":"exec_command","Name":"write_stdin"`},
			[2]string{`"name":"exec_command"`, `"name":"exec_command","Name":"write_stdin"`}))},
		{"item type and Type", call(pwn, rewriteCall(
			[2]string{`"type":"function_call"`, `"type":"function_call","Type":"message"`},
			[2]string{`"type":"function_call"`, `"type":"function_call","Type":"message"`}))},
		{"event type and Type", call(pwn, rewriteCall(
			[2]string{`"type":"response.output_item.done"`, `"type":"response.output_item.done","Type":"response.in_progress"`},
			[2]string{`"type":"response.completed"`, `"type":"response.completed","Type":"response.in_progress"`}))},
		{"item and Item", call(pwn, rewriteCall(
			[2]string{`"type":"response.output_item.done"`, `"Item":{"type":"function_call","name":"exec_command","call_id":"call_x","arguments":"{\"cmd\":\"git status\"}"},"type":"response.output_item.done"`},
			[2]string{`"type":"response.completed"`, `"Response":{"output":[]},"type":"response.completed"`}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := h.run("status-only", tc.reply, responsestest.Say("done"))
			if strings.Contains(o.patch, "pwned") {
				t.Errorf("the hidden command ran: pwned.txt is in the patch of %s:\n%s", o.id, o.patch)
			}
			if o.rec.State != "failed" || !strings.Contains(o.rec.Detail, "cannot read exactly") || !strings.Contains(o.rec.Detail, "refused before it ran") {
				t.Errorf("dispatch %s: %s %s %q, want failed saying the answer could not be read exactly and was refused before it ran", o.id, o.rec.State, o.rec.Reason, o.rec.Detail)
			}
			if len(o.entries) != 1 || o.entries[0]["decision"] != "denied" || !strings.Contains(fmt.Sprint(o.entries[0]["reason"]), "duplicate key") {
				t.Errorf("tool.call entries of %s: %v, want one denial naming the duplicate key", o.id, o.entries)
			}
		})
	}
	verifyToolCalls(t, h)
}

// TestCodexGate_BashScript_RealCLI, end to end: Codex 0.169.0 reports a script
// holding a single quote in double quotes with backslash escapes (/usr/bin/bash -lc "printf
// '%s\\n' ..."). Under "bash -lc *" (docs/runtimes.md: it grants any script) both checks
// allow it, the dispatch finishes and NOTES.md is in the patch, audited allowed; before the
// fix the relay let it through, it ran, and the check of what codex started refused it as
// "outside the grant". Under a narrower grant the same script is cut by the relay before
// codex sees it: denied, nothing in the patch.
func TestCodexGate_BashScript_RealCLI(t *testing.T) {
	h := newCodexGateHome(t)
	script := responsestest.Exec(`printf '%s\n' 'LINE' > NOTES.md && cat NOTES.md`)

	o := h.run("any-script", script, responsestest.Say("Notes written."))
	if o.rec.State != "finished" {
		t.Fatalf("dispatch %s under bash -lc *: %s %s %q\nstderr:\n%s", o.id, o.rec.State, o.rec.Reason, o.rec.Detail, h.agora("dispatch", "logs", o.id, "--stderr"))
	}
	if !strings.Contains(o.patch, "b/NOTES.md") || !strings.Contains(o.patch, "+LINE") {
		t.Errorf("NOTES.md is not in the patch of %s:\n%s", o.id, o.patch)
	}
	if got := o.decisions(); len(got) != 1 || got[0] != "exec_command allowed" {
		t.Errorf("tool.call entries of %s: %q, want exec_command allowed", o.id, got)
	}
	transcript := h.agora("dispatch", "logs", o.id, "--transcript")
	if !strings.Contains(transcript, `/usr/bin/bash -lc \"printf '%s\\\\n'`) && !strings.Contains(transcript, `/bin/bash -lc \"printf '%s\\\\n'`) {
		t.Errorf("codex did not report the double-quoted form this test is about; transcript:\n%.2000s", transcript)
	}

	o = h.run("printf-only", script, responsestest.Say("done"))
	if o.rec.State != "failed" || !strings.Contains(o.rec.Detail, "outside the grant") || !strings.Contains(o.rec.Detail, "refused before it ran") {
		t.Errorf("dispatch %s under printf **: %s %s %q, want failed, refused before it ran", o.id, o.rec.State, o.rec.Reason, o.rec.Detail)
	}
	if strings.Contains(o.patch, "NOTES.md") {
		t.Errorf("the refused script ran:\n%s", o.patch)
	}
	if got := o.decisions(); len(got) != 1 || got[0] != "exec_command denied" {
		t.Errorf("tool.call entries of %s: %q, want exec_command denied", o.id, got)
	}
	verifyToolCalls(t, h)
}

// verifyToolCalls exports the home's tool.call entries and checks the bundle with `agora
// verify`: the truthful log the tests above read is also one that verifies.
func verifyToolCalls(t *testing.T, h *codexGateHome) {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "tool-calls.json")
	h.agora("audit", "export", "--out", bundle, "--kind", "tool.call")
	out := h.agora("verify", bundle, "--key", filepath.Join(h.dir, "keys", "audit.pub"))
	if !strings.Contains(out, "tool.call") {
		t.Errorf("agora verify does not show the tool.call entries:\n%s", out)
	}
}
