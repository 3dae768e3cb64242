package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

const (
	oldV = "@sha256:" + "1111111111111111111111111111111111111111111111111111111111111111"
	curV = "@sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
)

// pinCatalog has subagents and env bundles, each with an old version and a current one, and
// "gone", a retired subagent and env bundle whose version still resolves (records stay
// readable). It is a plan.CurrentChecker.
type pinCatalog struct{}

func (pinCatalog) resolve(ref string) error {
	name, v, _ := strings.Cut(ref, "@")
	if name == "gone" && v == "" {
		return fmt.Errorf("%q not found", ref)
	}
	if v != "" && "@"+v != oldV && "@"+v != curV {
		return fmt.Errorf("%q: no such version", ref)
	}
	return nil
}

func (c pinCatalog) Current(_ context.Context, kind catalog.Kind, ref string) error {
	name, _, _ := strings.Cut(ref, "@")
	switch {
	case name == "gone":
		return fmt.Errorf("%s %q not found; known: worker (people retired it)", kind, name)
	case strings.HasSuffix(ref, oldV):
		return fmt.Errorf("%s %q: version %s is not its current one", kind, name, strings.TrimPrefix(oldV, "@"))
	}
	return c.resolve(ref)
}

func (c pinCatalog) Subagent(_ context.Context, ref string) error            { return c.resolve(ref) }
func (c pinCatalog) Reviewer(_ context.Context, ref, _ string) error         { return c.resolve(ref) }
func (c pinCatalog) Env(_ context.Context, ref string) error                 { return c.resolve(ref) }
func (pinCatalog) Target(context.Context, string) error                      { return nil }
func (pinCatalog) Workspace(context.Context, string, string) error           { return nil }
func (pinCatalog) Queue(context.Context, string) error                       { return nil }
func (pinCatalog) PinSubagent(_ context.Context, ref string) (string, error) { return ref + curV, nil }

// TestSubmit_PinsOnlyTheCurrentCatalog: a submitted plan (over MCP or from a file: both
// reach the service) that pins a version people superseded, of a task's subagent, a
// reviewer, a fixer, a fan-out template's subagent or an env bundle, or any version of a
// retired name, is refused naming it, and no run is made; the catalog still resolves each
// (a record reads it). A plan pinning the current versions starts.
func TestSubmit_PinsOnlyTheCurrentCatalog(t *testing.T) {
	c := startPinService(t)
	ctx := t.Context()

	for _, tt := range []struct{ name, task, want string }{
		{"task subagent", "{id: t, subagent: worker" + oldV + "}", `subagent "worker": version`},
		{"reviewer", "{id: t, subagent: worker, review: {subagents: [judge" + oldV + "], approve: 1}}", `subagent "judge": version`},
		{"fixer", "{id: t, subagent: worker, review: {subagents: [judge], approve: 1}, on_fail: {fix: {subagent: fixer" + oldV + "}}}", `subagent "fixer": version`},
		{"env bundle", "{id: t, subagent: worker, env: [ci" + oldV + "]}", `env bundle "ci": version`},
		{"retired subagent", "{id: t, subagent: gone" + curV + "}", `subagent "gone" not found; known: worker`},
		{"retired env bundle", "{id: t, subagent: worker, env: [gone" + curV + "]}", `env bundle "gone" not found; known: worker`},
	} {
		src := "version: 1\nname: pins\ntasks:\n  - " + tt.task + "\n"
		_, err := c.Submit(ctx, api.SubmitRequest{File: "p.yaml", Source: []byte(src), Actor: "mcp:x"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: submit = %v, want it refused with %q", tt.name, err, tt.want)
		}
	}
	src := "version: 1\nname: fan\ntasks:\n  - {id: split, subagent: worker}\n  - id: port\n    fan_out: {from: split, select: \"output:x.json\", template: {subagent: porter" + oldV + "}}\n"
	if _, err := c.Submit(ctx, api.SubmitRequest{File: "p.yaml", Source: []byte(src), Actor: "mcp:x"}); err == nil || !strings.Contains(err.Error(), `subagent "porter": version`) {
		t.Errorf("a fan-out template's superseded subagent: submit = %v, want it refused", err)
	}
	if runs, err := c.Runs(ctx, 0); err != nil || len(runs) != 0 {
		t.Fatalf("refused plans left runs: %v, %v", runs, err)
	}
	src = "version: 1\nname: cur\ntasks:\n  - {id: t, subagent: worker" + curV + ", env: [ci" + curV + "]}\n"
	if _, err := c.Submit(ctx, api.SubmitRequest{File: "p.yaml", Source: []byte(src), Actor: "mcp:x"}); err != nil {
		t.Errorf("a plan pinning the current versions: %v", err)
	}
}

// startPinService starts an engine over pinCatalog and a service on a socket of its own, and
// returns its client; both stop when the test ends.
func startPinService(t *testing.T) *client.Client {
	t.Helper()
	return startService(t, &recordingExec{subs: map[string]string{}}, orch.Options{Refs: pinCatalog{}, Queues: map[string]int{"default": 4}}, &service.Server{})
}

// startService opens an engine over x with opts in a database of its own and serves it with
// srv (its Engine set here) on a socket of its own, and returns the socket's client; both
// stop when the test ends.
func startService(t *testing.T, x orch.Executor, opts orch.Options, srv *service.Server) *client.Client {
	t.Helper()
	c, _ := startServiceOn(t, x, opts, srv)
	return c
}

// startServiceOn is startService that also returns the socket's path.
func startServiceOn(t *testing.T, x orch.Executor, opts orch.Options, srv *service.Server) (*client.Client, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "orch.db"), orch.Migrations())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	eng, err := orch.Open(ctx, db, audit.New(nil), x, opts)
	if err != nil {
		cancel()
		db.Close()
		t.Fatal(err)
	}
	engDone := make(chan struct{})
	go func() { eng.Run(ctx); close(engDone) }()
	sock := filepath.Join(dir, "orch.sock")
	ln, err := service.Listen(sock)
	if err != nil {
		cancel()
		<-engDone
		db.Close()
		t.Fatal(err)
	}
	srv.Engine = eng
	srvDone := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(srvDone) }()
	t.Cleanup(func() { cancel(); <-srvDone; <-engDone; db.Close() })
	return client.New(sock), sock
}
