package codexadapter

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// learnRelayRun is what one model answer did at a learn dispatch's relay.
type learnRelayRun struct {
	body    []byte
	readErr error
	a       *memAuditor
	stop    error
	scratch string
	audit   *codexAudit
}

// files returns "tool op path" of each file.would_deny record.
func (r learnRelayRun) files() []string {
	var out []string
	for _, d := range r.a.Records(entry.FileWouldDeny) {
		out = append(out, d["tool"].(string)+" "+d["op"].(string)+" "+d["path"].(string))
	}
	return out
}

// patches returns every apply_patch patch the body gives codex (in any event, any field).
func (r learnRelayRun) patches(t *testing.T) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		calls, why := eventCalls([]byte(data))
		if why != "" {
			t.Fatalf("codex would read an event the gate cannot: %s", why)
		}
		for _, c := range calls {
			if c.Patch != nil && *c.Patch != "" {
				out = append(out, *c.Patch)
			}
		}
	}
	return out
}

// learnRelay asks the Responses fake for one answer through a learn dispatch's relay, its gate
// and the real gateway (a learn gateway), as codex would, with the workspace dir.
func learnRelay(t *testing.T, dir string, grants grant.Set, reply responsestest.Reply) learnRelayRun {
	return learnRelayThen(t, dir, grants, reply, nil)
}

// learnRelayThen is learnRelay, then calls then (if not nil) while the gateway still serves.
func learnRelayThen(t *testing.T, dir string, grants grant.Set, reply responsestest.Reply, then func(learnRelayRun)) learnRelayRun {
	t.Helper()
	a := &memAuditor{}
	fake, err := responsestest.Start(codexTestKey, responsestest.Turns(reply))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	sock := filepath.Join(t.TempDir(), wire.GatewaySocket)
	g, err := modelgw.Listen(t.Context(), sock, modelgw.Config{
		DispatchID: "01JTESTDISPATCH", Role: "fixer@sha256:" + strings.Repeat("ab", 32),
		ModelAPI: modelgw.APIOpenAI, ModelBaseURL: fake.URL, APIKey: []byte(codexTestKey),
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:  a, Learn: true, RequestsPerSecond: 1000, RequestBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw := agentrun.DialGateway(sock)
	defer gw.Close()
	scratch, err := builtin.NewScratch(t.TempDir(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scratch.Close() })
	var mu sync.Mutex
	var cause error
	audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: dir, seen: map[string]bool{}, shell: "/usr/bin/bash",
		grants: grants, learn: true, stop: func(err error) { mu.Lock(); cause = err; mu.Unlock() },
		patches: &codexPatches{scratch: scratch, dir: dir}}
	rl, err := startCodexRelay(gw, learnGate(audit.precheck, audit.patches.rewritten))
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rl.URL+"/responses", strings.NewReader(`{"model":"gpt-5.5","stream":true,"input":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+rl.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	run := learnRelayRun{body: body, readErr: rerr, a: a, stop: cause, scratch: scratch.Dir(), audit: audit}
	mu.Unlock()
	if then != nil {
		then(run)
	}
	return run
}

// TestCodexLearn_PatchOutsideRewritten (file.would_deny for codex): in a learn
// dispatch, an apply_patch path outside the workspace (absolute, "..", through a symlink,
// under /agora) is recorded as file.would_deny once and rewritten into the scratch directory
// in every event codex reads the call from (the item, the response's output), its streamed
// pieces dropped; a path inside the workspace in the same patch stays as it is. A write into
// .git, a workspace file by its resolved absolute path, and a header Codex would read but
// not as written stay refused before codex sees them. Failed before: every such patch was
// refused (apply_patch denied, codex stopped).
func TestCodexLearn_PatchOutsideRewritten(t *testing.T) {
	grants := grant.Set{Tools: []string{"write_file"}}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "conf"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		patch  func(ws string) string
		custom bool
		// want are the file.would_deny records ("tool op path"), the path as the patch names it.
		want func(ws string) []string
		// gone are texts the rewritten patches must no longer name as a header's path.
		gone func(ws string) []string
		kept []string // headers that must reach codex unchanged
	}{
		{
			name:   "absolute and inside mixed",
			custom: true,
			patch: func(string) string {
				return "*** Begin Patch\n*** Add File: in.txt\n+in\n*** Add File: " + outside + "/new.txt\n+out\n*** End Patch\n"
			},
			want: func(string) []string { return []string{"apply_patch write " + outside + "/new.txt"} },
			gone: func(string) []string { return []string{"*** Add File: " + outside} },
			kept: []string{"*** Add File: in.txt\n"},
		},
		{
			name:  "dot dot, as a function call",
			patch: func(string) string { return "*** Begin Patch\n*** Add File: ../up.txt\n+x\n*** End Patch\n" },
			want:  func(string) []string { return []string{"apply_patch write ../up.txt"} },
			gone:  func(string) []string { return []string{"*** Add File: ../"} },
		},
		{
			name:   "update of a file outside, and a move out",
			custom: true,
			patch: func(string) string {
				return "*** Begin Patch\n*** Update File: " + outside + "/conf\n*** Move to: /agora/bin/agent\n@@\n one\n-two\n+TWO\n*** End Patch\n"
			},
			want: func(string) []string {
				return []string{"apply_patch edit " + outside + "/conf", "apply_patch move /agora/bin/agent"}
			},
			gone: func(string) []string { return []string{"*** Update File: " + outside, "*** Move to: /agora"} },
		},
		{
			name:   "through a symlink leading out",
			custom: true,
			patch:  func(string) string { return "*** Begin Patch\n*** Add File: link/x.txt\n+x\n*** End Patch\n" },
			want:   func(string) []string { return []string{"apply_patch write link/x.txt"} },
			gone:   func(string) []string { return []string{"*** Add File: link/"} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
				t.Fatal(err)
			}
			reply := responsestest.Patch(tc.patch(ws))
			if !tc.custom {
				reply = responsestest.Reply{Calls: []responsestest.Call{{Name: "apply_patch", Arguments: mustJSON(t, map[string]string{"input": tc.patch(ws)})}}}
			}
			r := learnRelay(t, ws, grants, reply)
			if r.readErr != nil || r.stop != nil {
				t.Fatalf("the learned patch was refused: read %v, stop %v\n%s", r.readErr, r.stop, r.body)
			}
			if got, want := r.files(), tc.want(ws); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("file.would_deny records %q, want %q (once, though two events carry the call)", got, want)
			}
			if c := r.a.ToolCalls(); len(c) != 0 {
				t.Errorf("tool.call records %q, want none from the gate", c)
			}
			for _, ev := range []string{"custom_tool_call_input.delta", "function_call_arguments.delta", "custom_tool_call_input.done", "function_call_arguments.done"} {
				if bytes.Contains(r.body, []byte(ev)) {
					t.Errorf("codex reads a %s event of the patch (it names the path as the model wrote it)", ev)
				}
			}
			ps := r.patches(t)
			if len(ps) < 2 {
				t.Fatalf("codex reads %d patches, want the item's and the response's:\n%s", len(ps), r.body)
			}
			for _, p := range ps {
				if p != ps[0] {
					t.Errorf("two events give codex different patches:\n%s\n---\n%s", ps[0], p)
				}
				for _, g := range tc.gone(ws) {
					if strings.Contains(p, g) {
						t.Errorf("codex reads %q in %q", g, p)
					}
				}
				for _, k := range tc.kept {
					if !strings.Contains(p, k) {
						t.Errorf("codex does not read %q in %q", k, p)
					}
				}
				for _, path := range patchPaths(p) {
					if outsideWorkspace(ws, path) != "" && !r.audit.patches.inScratch(path) {
						t.Errorf("codex reads %q, outside both the workspace and the scratch %s", path, r.scratch)
					}
				}
			}
			if strings.Contains(tc.name, "update") {
				b, err := os.ReadFile(filepath.Join(r.scratch, outside, "conf"))
				if err != nil || string(b) != "one\ntwo\n" {
					t.Errorf("the original was not copied into the scratch: %q, %v", b, err)
				}
			}
		})
	}
}

// TestCodexLearn_StaysRefused: what learn never opens, in a learn dispatch's patch: a write
// into .git, a workspace file by its resolved absolute path (the workspace reached through a
// link), a header Codex reads but the gate would not rewrite (a blank before the path), a
// path with a control character. Each is refused before codex sees it, recorded denied, and
// nothing is put on record as file.would_deny.
func TestCodexLearn_StaysRefused(t *testing.T) {
	grants := grant.Set{Tools: []string{"write_file"}}
	for _, tc := range []struct{ name, header string }{
		{"git", "*** Add File: .git/hooks/pre-commit"},
		{"absolute git", "*** Add File: WS/.git/config"},
		{"resolved workspace", "*** Add File: REAL/x.txt"},
		{"blank before the path", "*** Add File:  /tmp/x.txt"},
		{"leading blank", " *** Add File: /tmp/x.txt"},
		{"control character", "*** Add File: /tmp/x\x1b.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real := t.TempDir()
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Symlink(real, ws); err != nil {
				t.Fatal(err)
			}
			h := strings.NewReplacer("WS", ws, "REAL", real).Replace(tc.header)
			r := learnRelay(t, ws, grants, responsestest.Patch("*** Begin Patch\n"+h+"\n+x\n*** End Patch\n"))
			if bytes.Contains(r.body, []byte("response.output_item.done")) || r.stop == nil {
				t.Errorf("the patch reached codex (stop %v):\n%s", r.stop, r.body)
			}
			if c := r.a.ToolCalls(); len(c) != 1 || !strings.HasPrefix(c[0], "apply_patch denied ") {
				t.Errorf("tool.call records %q, want apply_patch denied", c)
			}
			if f := r.files(); len(f) != 0 {
				t.Errorf("file.would_deny records %q for a path learn never opens", f)
			}
		})
	}
}

// TestCodexLearn_OneEventRewrittenNotAnother: a hostile model gives the same call another
// patch in response.completed than in its item. Each patch is learned and rewritten on its
// own: no event codex reads names a path outside the workspace, and each path is on record.
func TestCodexLearn_OneEventRewrittenNotAnother(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	reply := responsestest.Patch("*** Begin Patch\n*** Add File: " + outside + "/a.txt\n+x\n*** End Patch\n")
	reply.Rewrite = func(d string) string {
		if strings.Contains(d, `"type":"response.completed"`) {
			return strings.Replace(d, "/a.txt", "/b.txt", 1)
		}
		return d
	}
	r := learnRelay(t, ws, grant.Set{Tools: []string{"write_file"}}, reply)
	if r.readErr != nil || r.stop != nil {
		t.Fatalf("refused: read %v, stop %v\n%s", r.readErr, r.stop, r.body)
	}
	if strings.Contains(strings.ReplaceAll(string(r.body), r.scratch+outside, ""), outside) {
		t.Errorf("an event codex reads names a path outside the workspace:\n%s", r.body)
	}
	if got := r.files(); len(got) != 2 || got[0] != "apply_patch write "+outside+"/a.txt" || got[1] != "apply_patch write "+outside+"/b.txt" {
		t.Errorf("file.would_deny records %q, want a.txt then b.txt", got)
	}
}

// TestCodexLearn_ScratchLinkOut: the check of what codex changed accepts a path in the
// scratch directory only where it resolves: a link planted in the scratch (the agent runs as
// the same user) leading out of it makes codex's change there a change outside, recorded as
// ran-outside-grant and codex stopped.
func TestCodexLearn_ScratchLinkOut(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	learnRelayThen(t, ws, grant.Set{Tools: []string{"write_file"}}, responsestest.Say("hi"), func(r learnRelayRun) {
		var mu sync.Mutex
		var cause error
		r.audit.stop = func(err error) { mu.Lock(); cause = err; mu.Unlock() }
		inScratch := filepath.Join(r.scratch, "tmp", "x.txt")
		r.audit.fileChange("i1", []codexrt.Change{{Path: inScratch, Kind: "add"}})
		if cause != nil {
			t.Fatalf("a change in the scratch was refused: %v", cause)
		}
		if err := os.Symlink(outside, filepath.Join(r.scratch, "planted")); err != nil {
			t.Fatal(err)
		}
		r.audit.fileChange("i2", []codexrt.Change{{Path: filepath.Join(r.scratch, "planted", "x.txt"), Kind: "add"}})
		mu.Lock()
		defer mu.Unlock()
		if cause == nil {
			t.Fatal("a change through a link planted in the scratch was accepted")
		}
		if c := r.a.ToolCalls(); len(c) != 2 || !strings.HasPrefix(c[1], "apply_patch "+decisionRanOutsideGrant) {
			t.Errorf("tool.call records %q, want the second ran-outside-grant", c)
		}
	})
}

// FuzzCodexLearnGate: whatever stream the model sends a learn dispatch's gate, judged as
// precheck judges a patch (its paths after learning: inside the workspace or the scratch),
// every event released decodes, and every patch codex could read in it names only paths
// inside the workspace or the scratch directory.
func FuzzCodexLearnGate(f *testing.F) {
	f.Add("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"custom_tool_call\",\"name\":\"apply_patch\",\"call_id\":\"c\",\"input\":\"*** Begin Patch\\n*** Add File: /tmp/x\\n+x\\n*** End Patch\\n\"}}\n\n")
	f.Add("data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"id\":\"fc\",\"name\":\"apply_patch\",\"call_id\":\"c\",\"arguments\":\"{\\\"input\\\":\\\"*** Update File: ../a\\\\n*** Move to: /agora/b\\\\n\\\"}\"}}\n\n")
	f.Add("data: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"custom_tool_call\",\"name\":\"apply_patch\",\"call_id\":\"c\",\"input\":\"*** Delete File: /etc/passwd\\r\\n\"}]}}\n\n")
	f.Add("data: {\"type\":\"response.custom_tool_call_input.delta\",\"item_id\":\"x\",\"delta\":\"*** Add File: /tmp/y\"}\n\n")
	ws := f.TempDir()
	scratch, err := builtin.NewScratch(f.TempDir(), ws)
	if err != nil {
		f.Fatal(err)
	}
	defer scratch.Close()
	f.Fuzz(func(t *testing.T, s string) {
		p := &codexPatches{scratch: scratch, dir: ws}
		judge := func(c modelCall) error {
			if c.Refused != "" {
				return errors.New("refused")
			}
			if c.Patch == nil {
				return nil
			}
			out, err := p.learnPatch(c.ID, *c.Patch, func(string, string) error { return nil })
			if err != nil {
				return err
			}
			for _, path := range patchPaths(out) {
				for _, q := range []string{path, strings.TrimSpace(path)} {
					if !p.inScratch(q) && outsideWorkspace(ws, q) != "" {
						return errors.New("refused")
					}
				}
			}
			return nil
		}
		g := &callGate{src: bufioReader(s), body: io.NopCloser(nil), judge: judge, rewrite: p.rewritten}
		out, _ := io.ReadAll(g)
		for _, payload := range sseData(string(out)) {
			calls, why := eventCalls([]byte(payload))
			if why != "" {
				t.Fatalf("the gate released an event it cannot read: %s: %q", why, payload)
			}
			for _, c := range calls {
				if c.Patch == nil {
					continue
				}
				for _, path := range patchPaths(*c.Patch) {
					for _, q := range []string{path, strings.TrimSpace(path)} {
						if !p.inScratch(q) && outsideWorkspace(ws, q) != "" {
							t.Fatalf("codex reads a patch naming %q, outside the workspace and the scratch: %q", q, payload)
						}
					}
				}
			}
		}
	})
}
