package dispatch_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// newModelEnv is newEnv with the egress policy agora.yaml's `egress: {allow_private:
// [127.0.0.1/32]}` gives: the gateways may reach the test servers on loopback.
func newModelEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	return e
}

// capability registers a capability from capability.yaml and files (path -> content; a
// path in exec is archived executable).
func (e *env) capability(name, yaml string, files map[string]string, exec ...string) {
	e.t.Helper()
	dir := e.t.TempDir()
	all := map[string]string{"capability.yaml": yaml}
	for p, s := range files {
		all[p] = s
	}
	for p, s := range all {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			e.t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		for _, x := range exec {
			if x == p {
				mode = 0o755
			}
		}
		if err := os.WriteFile(full, []byte(s), mode); err != nil {
			e.t.Fatal(err)
		}
	}
	pc, err := e.w.PrepareCapability(name, dir, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(e.t.Context(), "test", "register", pc); err != nil {
		e.t.Fatal(err)
	}
}

// modelSubagent registers a subagent of a model runtime holding caps.
func (e *env) modelSubagent(name, runtime string, caps ...string) {
	e.t.Helper()
	p, err := e.w.PrepareSubagent(e.t.Context(), name, provision.SubagentSpec{
		Runtime: runtime, Model: "test-model", SystemPrompt: "You are " + name + ". Use only the tools you are given.",
		Capabilities: caps,
	}, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(e.t.Context(), "test", "register", p); err != nil {
		e.t.Fatal(err)
	}
}

// envBundle registers an env bundle with plain values and secrets.
func (e *env) envBundle(name string, values map[string]string, secrets map[string]string) {
	e.t.Helper()
	sec := map[string][]byte{}
	for k, v := range secrets {
		sec[k] = []byte(v)
	}
	p, err := e.w.PrepareEnv(name, values, sec, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(e.t.Context(), "test", "register", p); err != nil {
		e.t.Fatal(err)
	}
}

// model starts a scripted model on loopback and registers env bundle "model" pointing at it
// with key as its OPENAI_API_KEY secret.
func (e *env) model(key string, script ...openaitest.Step) *openaitest.Server {
	e.t.Helper()
	srv := openaitest.New(e.t, script...)
	srv.RequireAPIKey(key)
	e.envBundle("model", map[string]string{"OPENAI_BASE_URL": srv.URL()}, map[string]string{"OPENAI_API_KEY": key})
	return srv
}

// blob returns the content of a stored artifact.
func (e *env) blob(a *dispatch.Artifact) string {
	e.t.Helper()
	if a == nil {
		e.t.Fatal("no artifact")
	}
	b, err := e.home.Blobs.Get(a.Digest, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// output returns the content of the dispatch's output at path.
func (e *env) output(r *dispatch.Record, path string) string {
	e.t.Helper()
	if r.Result == nil {
		e.t.Fatalf("dispatch %s has no result", r.ID)
	}
	for _, o := range r.Result.Outputs {
		if o.Path == path {
			return e.blob(&dispatch.Artifact{Digest: o.Digest, Size: o.Size})
		}
	}
	e.t.Fatalf("dispatch %s (%s %s: %s) has no output %q: %+v", r.ID, r.State, r.Reason, r.Detail, path, r.Result.Outputs)
	return ""
}

// audited returns the dispatch's audit entries of kind.
func (e *env) audited(r *dispatch.Record, kind string) []audit.Record {
	e.t.Helper()
	all, err := audit.List(context.Background(), e.home.DB.SQL(), audit.ListOptions{Kind: kind})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []audit.Record
	for _, a := range all {
		if a.Subject == "dispatch/"+r.ID {
			out = append(out, a)
		}
	}
	return out
}

// toolCalls returns "tool decision reason" of each tool.call entry of the dispatch, checking
// every one names the dispatch and its role.
func (e *env) toolCalls(r *dispatch.Record) []string {
	e.t.Helper()
	role := r.Subagent + "@" + string(r.SubagentDigest)
	var out []string
	for _, a := range e.audited(r, "tool.call") {
		if a.Actor != "dispatch/"+r.ID+" "+role || a.Details["role"] != role || a.Details["dispatch"] != r.ID {
			e.t.Errorf("tool.call entry attributed to %q (role %v), want the dispatch and %s", a.Actor, a.Details["role"], role)
		}
		if h, _ := a.Details["args_hash"].(string); !strings.HasPrefix(h, "sha256:") {
			e.t.Errorf("tool.call entry without an args hash: %v", a.Details)
		}
		out = append(out, a.Details["tool"].(string)+" "+a.Details["decision"].(string)+" "+a.Details["reason"].(string))
	}
	return out
}

// toolResults returns the tool messages the model received in req, in order.
func toolResults(req openaitest.Request) []string {
	var out []string
	for _, m := range req.Body.Messages {
		if m.Role == "tool" {
			out = append(out, m.Text())
		}
	}
	return out
}

// lastToolResult returns the last tool message of req.
func lastToolResult(t testing.TB, req openaitest.Request) string {
	t.Helper()
	rs := toolResults(req)
	if len(rs) == 0 {
		t.Errorf("request has no tool result")
		return ""
	}
	return rs[len(rs)-1]
}

// offered returns the names of the tools offered in req.
func offered(req openaitest.Request) []string {
	var out []string
	for _, tl := range req.Body.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantFinished fails the test unless r finished.
func wantFinished(t testing.TB, r *dispatch.Record) {
	t.Helper()
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	}
}

// gitRepo makes a git repository with one commit holding files.
func gitRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, dir, "init", "-q", "-b", "main")
	gitCommitAll(t, dir)
	return dir
}

// gitCommitAll commits everything in dir.
func gitCommitAll(t testing.TB, dir string) {
	t.Helper()
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", "commit")
}

func runGit(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
