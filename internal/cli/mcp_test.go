package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/mcpserver"
)

func runIn(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := NewFactory(&IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(k string) string { return env[k] })
	defer f.Close()
	code := Run(context.Background(), f, args)
	return code, out.String() + errOut.String()
}

// TestMCPAuditor_GroupCommit writes entries from many callers at once: each returns only
// after its entry is committed, and the log they make verifies (inclusion proofs against a
// signed checkpoint), so batching entries into one transaction keeps the tree right.
func TestMCPAuditor_GroupCommit(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if code, out := runIn(t, env, "init"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	h, err := home.Open(t.Context(), env["AGORA_HOME"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	a := newMCPAuditor(h, audit.New(nil))
	var runner sync.WaitGroup
	runner.Go(func() { a.run(ctx) })
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- a.Record(t.Context(), mcpserver.AuditEntry{Actor: fmt.Sprintf("client-%d", i%4), Kind: mcpserver.KindToolCall,
				Subject: "mcp/agora_dispatch_describe", Details: map[string]any{"tool": "agora_dispatch_describe", "decision": "allowed"}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Record: %v", err)
		}
	}
	recs, err := audit.List(t.Context(), h.DB.SQL(), audit.ListOptions{Kind: "mcp.*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d mcp entries, want %d", len(recs), n)
	}
	cancel()
	runner.Wait()
	if err := a.Record(t.Context(), mcpserver.AuditEntry{Kind: mcpserver.KindToolCall}); err == nil {
		t.Error("Record after the auditor stopped succeeded; the call would run unaudited")
	}
	h.Close()

	bundle := filepath.Join(dir, "bundle.json")
	for _, args := range [][]string{{"audit", "checkpoint"}, {"audit", "export", "--out", bundle, "--kind", "mcp.*"}, {"verify", bundle}} {
		if code, out := runIn(t, env, args...); code != 0 {
			t.Fatalf("agora %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// TestMCPRecord_CarriesNoHostDetails: what the MCP view leaves out of a record.
func TestMCPRecord_CarriesNoHostDetails(t *testing.T) {
	exit := 0
	now := time.Unix(1e9, 0).UTC()
	r := &dispatch.Record{
		ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", State: dispatch.StateNeedsInput, Subagent: "writer", SubagentDigest: blob.Digest("sha256:ab"),
		Envs: []dispatch.EnvRef{{Name: "demo", Digest: "sha256:cd"}}, Target: "local", Sandbox: "bwrap", Network: "none",
		Repo: "/home/alice/src/secret-project", Revision: "deadbeef", CallbackURL: "https://hooks.example.com/x?sig=abc",
		ProviderTaskID: "local:4242", Timeout: dispatch.Duration(90 * time.Second), ExitCode: &exit, CreatedAt: now,
		Result: &dispatch.Result{
			Patch:      &dispatch.Artifact{Digest: "sha256:ef", Size: 10},
			Outputs:    []dispatch.Output{{Path: "report.md", Digest: "sha256:01", Size: 3}},
			NeedsInput: &dispatch.NeedsInput{Question: "which?", Options: []string{"a"}, PartialState: json.RawMessage(`{"draft":"PARTIAL"}`)},
		},
		Events: []dispatch.Event{{Seq: 0, Kind: "accepted", At: now, Data: map[string]any{"input_digest": "sha256:99", "provider_task_id": "local:4242"}}},
	}
	got, err := json.Marshal(mcpRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"/home/alice", "deadbeef", "hooks.example.com", "local:4242", "PARTIAL", "sha256:99"} {
		if strings.Contains(string(got), leak) {
			t.Errorf("the MCP record carries %q: %s", leak, got)
		}
	}
	for _, want := range []string{`"done":true`, `"subagent":"writer@sha256:ab"`, `"envs":["demo@sha256:cd"]`, `"timeout_seconds":90`,
		`"patch":{"digest":"sha256:ef","size":10}`, `"question":"which?"`, `"events":[{"kind":"accepted"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the MCP record lacks %s: %s", want, got)
		}
	}
}
