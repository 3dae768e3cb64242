package dispatch_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestLearn_OpenAIWriteOutsideWorkspace (file.would_deny, openai runtime): a learn
// dispatch's model writes outside the workspace with write_file: an absolute path, a path
// climbing out with "..", a path into /agora (the worker's own files). Each is recorded as
// file.would_deny by the worker (reporter "worker": its key) with the path as the sandbox
// names it, before the write, and the write goes to a scratch directory in the sandbox's
// /tmp: the path asked for stays as it was, and nothing reaches the patch. The agent's own
// process then posts a forged file.would_deny to the gateway's socket without the key: it is
// recorded as reporter "sandbox". The same writes in a plain dispatch are refused, and the
// gateway refuses a file report there, unrecorded. Failed before: the learn dispatch's
// writes were refused and nothing was recorded (/audit/file did not exist).
func TestLearn_OpenAIWriteOutsideWorkspace(t *testing.T) {
	requireTool(t, "curl")
	e := netEnv(t, nil)
	e.d.Egress.AllowPrivate = append(e.d.Egress.AllowPrivate, netip.MustParsePrefix("127.0.0.1/32"))
	e.capability("writer", "tools: [write_file, run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("learner", "openai", "writer")
	forged := `{"tool":"write_file","path":"/etc/forged","op":"write","reason":"x"}`
	check := "cat /etc/agora-learned.conf 2>/dev/null || echo etc=absent; ls /agora/gateway; " +
		"cat /tmp/agora-learn-writes-*/etc/agora-learned.conf; echo; " +
		"curl -sS --unix-socket /agora/gateway/gateway.sock -d '" + forged + "' http://gateway/audit/file -o /dev/null -w 'forge=%{http_code}'"
	steps := func() []openaitest.Step {
		return []openaitest.Step{
			openaitest.CallTool("write_file", mustJSON(t, map[string]any{"path": "/etc/agora-learned.conf", "content": "LEARNED-ETC"})),
			openaitest.CallTool("write_file", mustJSON(t, map[string]any{"path": "../escape.txt", "content": "LEARNED-UP"})),
			openaitest.CallTool("write_file", mustJSON(t, map[string]any{"path": "/agora/gateway/gateway.sock", "content": "LEARNED-AGORA"})),
			openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", check}})),
		}
	}
	var results []string
	e.model(testAPIKey, append(steps(), openaitest.Func(func(req openaitest.Request) openaitest.Reply {
		results = toolResults(req)
		return openaitest.Reply{Content: "done"}
	}))...)
	r := e.run(dispatch.Request{Subagent: "learner", Envs: []string{"model"}, Learn: true, Input: []byte(`{"prompt":"write"}`)})
	wantFinished(t, r)
	if len(results) != 4 {
		t.Fatalf("tool results %q", results)
	}
	for i, res := range results[:3] {
		if !strings.Contains(res, "file.would_deny") || !strings.Contains(res, "/tmp/agora-learn-writes-") {
			t.Errorf("write %d: the model read %q, want it recorded and made in the scratch directory", i, res)
		}
	}
	if out := results[3]; !strings.Contains(out, "etc=absent") || !strings.Contains(out, "gateway.sock") ||
		!strings.Contains(out, "LEARNED-ETC") || !strings.Contains(out, "forge=204") {
		t.Errorf("the agent's look around: %q; want /etc untouched, the socket there, the scratch copy, the forgery recorded", out)
	}
	byReporter := map[string][]string{}
	for _, a := range e.audited(r, entry.FileWouldDeny) {
		w, _ := entry.ReadWouldDeny(entry.FileWouldDeny, a.Details)
		byReporter[w.Reporter] = append(byReporter[w.Reporter], w.Path+" "+w.Op+" "+w.Tool)
		if w.Role != r.Subagent+"@"+string(r.SubagentDigest) {
			t.Errorf("file.would_deny role %q", w.Role)
		}
	}
	want := []string{"/etc/agora-learned.conf write write_file", "../escape.txt write write_file", "/agora/gateway/gateway.sock write write_file"}
	if !slices.Equal(byReporter["worker"], want) || !slices.Equal(byReporter["sandbox"], []string{"/etc/forged write write_file"}) || len(byReporter) != 2 {
		t.Errorf("file.would_deny by reporter %q, want the worker's %q and the forged one as sandbox", byReporter, want)
	}
	if r.Result != nil && r.Result.Patch != nil && strings.Contains(e.patch(r), "LEARNED") {
		t.Errorf("a learned write reached the patch:\n%s", e.patch(r))
	}

	// The same in a plain dispatch: refused, nothing recorded, the report refused.
	e.model(testAPIKey, append(steps(), openaitest.Func(func(req openaitest.Request) openaitest.Reply {
		results = toolResults(req)
		return openaitest.Reply{Content: "done"}
	}))...)
	plain := e.run(dispatch.Request{Subagent: "learner", Envs: []string{"model"}, Input: []byte(`{"prompt":"write"}`)})
	wantFinished(t, plain)
	for i, res := range results[:3] {
		if !strings.Contains(res, "outside the workspace") || strings.Contains(res, "file.would_deny") {
			t.Errorf("plain write %d: the model read %q, want it refused", i, res)
		}
	}
	if out := results[3]; !strings.Contains(out, "forge=400") || strings.Contains(out, "LEARNED") {
		t.Errorf("plain: %q, want no scratch copy and the report refused", out)
	}
	if n := len(e.audited(plain, entry.FileWouldDeny)); n != 0 {
		t.Errorf("a plain dispatch recorded %d file.would_deny", n)
	}
}
