package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// loopOut is a dispatch result with what it produced.
type loopOut struct {
	Dispatch mcpserver.Record  `json:"dispatch"`
	Results  mcpserver.Results `json:"results"`
	Note     string            `json:"note"`
}

// progressClient connects like stdioSession/httpSession and collects progress notifications.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, req.Params.Message)
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.msgs...)
}

// TestLoop_OverStdioAndHTTP is the orchestrator's loop with the official SDK client against
// the real binary, over both transports: dispatch against a workspace at a revision with a
// progress token (notifications arrive), read the patch from describe and from its resource
// (the same bytes as `agora dispatch patch`), apply it to a clone and compare trees; answer a
// question with resume; every resource read is in the audit log.
func TestLoop_OverStdioAndHTTP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	agora(t, home, nil, "subagent", "register", "chooser", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) echo "$AGORA_INPUT_JSON" > answer.json;; *) printf %s "{\"question\":\"Which color?\",\"options\":[\"red\",\"blue\"]}" > "$AGORA_OUT/needs_input.json";; esac'`)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token})

	for name, connect := range map[string]func(*progressLog) *mcp.ClientSession{
		"stdio": func(p *progressLog) *mcp.ClientSession {
			cmd := exec.Command(agoraBin, "mcp")
			cmd.Env = baseEnv(home)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "loop-test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: p.handler}).
				Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		},
		"http": func(p *progressLog) *mcp.ClientSession {
			hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "loop-test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: p.handler}).
				Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		},
	} {
		t.Run(name, func(t *testing.T) {
			var prog progressLog
			cs := connect(&prog)
			params := &mcp.CallToolParams{Name: "agora_dispatch", Arguments: map[string]any{
				"subagent": "writer", "envs": []string{"demo"}, "workspace": "app", "revision": "release/1", "wait_seconds": 120}}
			params.SetProgressToken("loop-" + name)
			res, err := cs.CallTool(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			var out loopOut
			decode(t, res, &out)
			r := out.Dispatch
			if r.State != "finished" || r.Revision != commits["release/1"] || out.Results.Patch == nil {
				t.Fatalf("dispatch = %+v %+v", r, out.Results)
			}
			// The client handles notifications on goroutines of its own, in any order, and the
			// last may land just after the answer it came before. One says the dispatch
			// finished, once; the one sent when the call began to wait says the state then (the
			// same notification, for a dispatch that ended before the wait began).
			finished := func(msgs []string) (n int) {
				for _, m := range msgs {
					if strings.Contains(m, r.ID+" finished") {
						n++
					}
				}
				return n
			}
			msgs := prog.all()
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && finished(msgs) == 0; msgs = prog.all() {
				time.Sleep(20 * time.Millisecond)
			}
			if finished(msgs) != 1 {
				t.Errorf("progress notifications: %q, want one that says dispatch %s finished", msgs, r.ID)
			}
			for _, m := range msgs {
				if !strings.HasPrefix(m, "dispatch "+r.ID+" ") || !strings.HasSuffix(m, "s elapsed") {
					t.Errorf("progress notification %q: want the dispatch, its state and the seconds elapsed", m)
				}
			}

			var desc loopOut
			decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": r.ID}), &desc)
			host := string(agora(t, home, nil, "dispatch", "patch", r.ID))
			if desc.Results.Patch.Text != host || desc.Results.Patch.Truncated || desc.Results.Diffstat.Files != 1 {
				t.Errorf("describe's patch differs from agora dispatch patch:\n%s\n---\n%s", desc.Results.Patch.Text, host)
			}
			if len(desc.Results.Outputs) != 1 || desc.Results.Outputs[0].Path != "report.md" {
				t.Errorf("outputs = %+v", desc.Results.Outputs)
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: desc.Results.Patch.URI})
			if err != nil || rr.Contents[0].Text != host {
				t.Fatalf("patch resource: %v", err)
			}
			rep, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: desc.Results.Outputs[0].URI})
			if err != nil || rep.Contents[0].Text != "report\n" {
				t.Errorf("output resource: %+v, %v", rep, err)
			}
			if strings.Contains(text(res), repo) || strings.Contains(rr.Contents[0].Text, repo) {
				t.Error("the repository path reached the client")
			}

			// Apply the patch to a clone at the dispatch's commit: the tree is the worker's.
			clone := filepath.Join(t.TempDir(), "clone")
			gitC := func(dir string, args ...string) string {
				cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
				cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
				cmd.Stdin = strings.NewReader(rr.Contents[0].Text)
				b, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, b)
				}
				return strings.TrimSpace(string(b))
			}
			gitC(filepath.Dir(clone), "clone", "-q", repo, clone)
			gitC(clone, "checkout", "-q", r.Revision)
			gitC(clone, "apply", "--index", "-")
			if got, _ := os.ReadFile(filepath.Join(clone, "hello.txt")); string(got) != "hello\n" {
				t.Errorf("hello.txt after apply = %q", got)
			}
			if files := gitC(clone, "diff", "--cached", "--name-only", r.Revision); files != "hello.txt" {
				t.Errorf("the applied tree differs from the commit in %q, want hello.txt only", files)
			}

			// A question, answered through resume.
			var ask loopOut
			decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "chooser", "wait_seconds": 120}), &ask)
			if ask.Dispatch.State != "needs_input" || ask.Dispatch.NeedsInput == nil || strings.Join(ask.Dispatch.NeedsInput.Options, ",") != "red,blue" ||
				!strings.Contains(ask.Note, `"resume"`) {
				t.Fatalf("asker = %+v, note %q", ask.Dispatch, ask.Note)
			}
			var child loopOut
			decode(t, call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": ask.Dispatch.ID, "answer": "blue"}, "wait_seconds": 120}), &child)
			if child.Dispatch.State != "finished" || child.Dispatch.ParentID != ask.Dispatch.ID || !strings.Contains(child.Results.Patch.Text, `"answer":"blue"`) {
				t.Errorf("resumed child = %+v\n%+v", child.Dispatch, child.Results.Patch)
			}
			if res := call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": r.ID, "answer": "x"}}); !res.IsError ||
				!strings.Contains(text(res), "only a dispatch that needs input can be resumed") {
				t.Errorf("resume of a finished dispatch: %s", text(res))
			}

			// Workspaces as a resource: names and patterns, never the path.
			ws, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "agora://workspaces"})
			if err != nil || !strings.Contains(ws.Contents[0].Text, `"name":"app"`) || strings.Contains(ws.Contents[0].Text, repo) {
				t.Errorf("agora://workspaces: %+v %v", ws, err)
			}
		})
	}
	var entries []struct {
		Kind    string         `json:"kind"`
		Actor   string         `json:"actor"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(agora(t, home, nil, "audit", "log", "-o", "json", "--limit", "1000"), &entries); err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, e := range entries {
		if e.Kind == entry.MCPResourceRead {
			reads++
		}
	}
	if reads != 6 {
		t.Errorf("%d resource reads in the audit log, want 6 (3 per transport)", reads)
	}
}
