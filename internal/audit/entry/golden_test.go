package entry_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/old-log.jsonl from the old shapes (never needed again: the old code is gone)")

// goldenPath holds, one a line, the bytes of each entry of the log that the old shapes
// (oldShapes) write: written once at 99408dd, the commit before this package existed, by
// `go test -run TestGolden -update`. It is never rewritten from the new builders.
const goldenPath = "testdata/old-log.jsonl"

// golden is one entry as the old code spelled it (literal kinds, subjects and keys, copied
// from the writers at 99408dd) beside the same entry built from this package.
type golden struct {
	name     string
	old, new audit.Entry
}

func d(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// cases holds an entry for every kind, with the details readers parse.
func cases() []golden {
	const id, run, task, actor = "d-1", "r-1", "t-1", "dispatch/d-1 role@sha256:ab"
	gw := func(k string) map[string]any {
		return d(k, "anthropic", "decision", "allowed", "model", "claude", "input_tokens", int64(10),
			"output_tokens", int64(5), "cached_tokens", int64(2), "cost_nano_usd", int64(900), "status", 200)
	}
	return []golden{
		{"catalog register",
			audit.Entry{Actor: "alice", Kind: "catalog.capability.register", Subject: "capability/repo-tools", Details: d("digest", "sha256:ab")},
			audit.Entry{Actor: "alice", Kind: entry.Catalog("capability", "register"), Subject: entry.CatalogItem("capability", "repo-tools"), Details: d("digest", "sha256:ab")}},
		{"catalog retire",
			audit.Entry{Actor: "alice", Kind: "catalog.env.retire", Subject: "env/prod"},
			audit.Entry{Actor: "alice", Kind: entry.Catalog("env", "retire"), Subject: entry.CatalogItem("env", "prod")}},
		{"catalog import",
			audit.Entry{Actor: "alice", Kind: "catalog.import", Subject: "claude-agents/agents", Details: d("n", 2)},
			audit.Entry{Actor: "alice", Kind: entry.CatalogImport, Subject: entry.ClaudeAgents("agents"), Details: d("n", 2)}},
		{"catalog apply",
			audit.Entry{Actor: "alice", Kind: "catalog.apply", Subject: "manifest/agora.yaml"},
			audit.Entry{Actor: "alice", Kind: entry.CatalogApply, Subject: entry.Manifest("agora.yaml")}},
		{"dispatch accepted",
			audit.Entry{Actor: "alice", Kind: "dispatch." + "accepted", Subject: "dispatch/" + id,
				Details: d("target", "local", "subagent", "fixer", "input_digest", "sha256:cd", "envs", []any{"prod"}, "repo", "/r", "verify", true)},
			audit.Entry{Actor: "alice", Kind: entry.DispatchState("accepted"), Subject: entry.Dispatch(id),
				Details: d(entry.KeyTarget, "local", entry.KeySubagent, "fixer", entry.KeyInputDigest, "sha256:cd", entry.KeyEnvs, []any{"prod"}, entry.KeyRepo, "/r", entry.KeyVerify, true)}},
		{"dispatch started",
			audit.Entry{Actor: "alice", Kind: "dispatch.started", Subject: "dispatch/" + id},
			audit.Entry{Actor: "alice", Kind: entry.DispatchStarted, Subject: entry.Dispatch(id)}},
		{"dispatch finished",
			audit.Entry{Actor: "alice", Kind: "dispatch.finished", Subject: "dispatch/" + id, Details: d("manifest", "sha256:ee", "verdict", "sha256:ff", "patch_digest", "sha256:11")},
			audit.Entry{Actor: "alice", Kind: entry.DispatchFinished, Subject: entry.Dispatch(id), Details: d(entry.KeyManifest, "sha256:ee", entry.KeyVerdict, "sha256:ff", entry.KeyPatchDigest, "sha256:11")}},
		{"dispatch failed",
			audit.Entry{Actor: "alice", Kind: "dispatch.failed", Subject: "dispatch/" + id, Details: d("reason", "verify-failed", "manifest", "sha256:ee")},
			audit.Entry{Actor: "alice", Kind: entry.DispatchFailed, Subject: entry.Dispatch(id), Details: d(entry.KeyReason, "verify-failed", entry.KeyManifest, "sha256:ee")}},
		{"dispatch cancelled",
			audit.Entry{Actor: "alice", Kind: "dispatch.cancelled", Subject: "dispatch/" + id},
			audit.Entry{Actor: "alice", Kind: entry.DispatchCancelled, Subject: entry.Dispatch(id)}},
		{"dispatch needs input",
			audit.Entry{Actor: "alice", Kind: "dispatch.needs_input", Subject: "dispatch/" + id},
			audit.Entry{Actor: "alice", Kind: entry.DispatchNeedsInput, Subject: entry.Dispatch(id)}},
		{"dispatch answered",
			audit.Entry{Actor: "alice", Kind: "dispatch." + "answered", Subject: "dispatch/" + id},
			audit.Entry{Actor: "alice", Kind: entry.DispatchAnswered, Subject: entry.Dispatch(id)}},
		{"dispatch verified",
			audit.Entry{Actor: "alice", Kind: "dispatch.verified", Subject: "dispatch/" + id, Details: d("verdict", "sha256:ff")},
			audit.Entry{Actor: "alice", Kind: entry.DispatchVerified, Subject: entry.Dispatch(id), Details: d(entry.KeyVerdict, "sha256:ff")}},
		{"dispatch cancel requested",
			audit.Entry{Actor: "bob", Kind: "dispatch.cancel_requested", Subject: "dispatch/" + id},
			audit.Entry{Actor: "bob", Kind: entry.DispatchCancelRequested, Subject: entry.Dispatch(id)}},
		{"dispatch resume refused",
			audit.Entry{Actor: "bob", Kind: "dispatch.resume.refused", Subject: "dispatch/" + id, Details: d("reason", "x")},
			audit.Entry{Actor: "bob", Kind: entry.DispatchResumeRefused, Subject: entry.Dispatch(id), Details: d(entry.KeyReason, "x")}},
		{"approval request",
			audit.Entry{Actor: "dispatch/" + id + " " + "role@sha256:ab", Kind: "approval.request", Subject: "dispatch/" + id, Details: d("tool", "bash", "rule", "r")},
			audit.Entry{Actor: entry.GatewayActor(id, "role@sha256:ab"), Kind: entry.ApprovalRequest, Subject: entry.Dispatch(id), Details: d(entry.KeyTool, "bash", "rule", "r")}},
		{"approval decision",
			audit.Entry{Actor: "bob", Kind: "approval.decision", Subject: "dispatch/" + id, Details: d("decision", "approved", "reason", "ok")},
			audit.Entry{Actor: "bob", Kind: entry.ApprovalDecision, Subject: entry.Dispatch(id), Details: d(entry.KeyDecision, "approved", entry.KeyReason, "ok")}},
		{"tool gateway",
			audit.Entry{Actor: actor, Kind: "tool.gateway", Subject: "dispatch/" + id, Details: gw("route")},
			audit.Entry{Actor: actor, Kind: entry.ToolGateway, Subject: entry.Dispatch(id), Details: gw(entry.KeyRoute)}},
		{"tool gateway refused",
			audit.Entry{Actor: actor, Kind: "tool.gateway.refused", Subject: "dispatch/" + id, Details: d("route", "anthropic", "count", int64(3), "reason", "too many")},
			audit.Entry{Actor: actor, Kind: entry.ToolGatewayRefused, Subject: entry.Dispatch(id), Details: d(entry.KeyRoute, "anthropic", entry.KeyCount, int64(3), entry.KeyReason, "too many")}},
		{"tool gateway budget",
			audit.Entry{Actor: actor, Kind: "tool.gateway.budget", Subject: "dispatch/" + id, Details: d("entries", 100)},
			audit.Entry{Actor: actor, Kind: entry.ToolGatewayBudget, Subject: entry.Dispatch(id), Details: d(entry.KeyEntries, 100)}},
		{"tool call",
			audit.Entry{Actor: actor, Kind: "tool.call", Subject: "dispatch/" + id, Details: d("tool", "bash", "decision", "allowed", "reason", "", "phase", "run", "x", 1)},
			audit.Entry{Actor: actor, Kind: entry.ToolCall, Subject: entry.Dispatch(id), Details: d(entry.KeyTool, "bash", entry.KeyDecision, "allowed", entry.KeyReason, "", entry.KeyPhase, "run", "x", 1)}},
		{"net connect",
			audit.Entry{Actor: actor, Kind: "net.connect", Subject: "dispatch/" + id, Details: d("host", "example.com", "port", 443, "decision", "allowed", "via", "proxy")},
			audit.Entry{Actor: actor, Kind: entry.NetConnect, Subject: entry.Dispatch(id), Details: d(entry.KeyHost, "example.com", entry.KeyPort, 443, entry.KeyDecision, "allowed", entry.KeyVia, "proxy")}},
		{"net request",
			audit.Entry{Actor: actor, Kind: "net.request", Subject: "dispatch/" + id, Details: d("method", "POST", "path", "/x", "decision", "denied")},
			audit.Entry{Actor: actor, Kind: entry.NetRequest, Subject: entry.Dispatch(id), Details: d(entry.KeyMethod, "POST", entry.KeyPath, "/x", entry.KeyDecision, "denied")}},
		{"net close",
			audit.Entry{Actor: actor, Kind: "net.close", Subject: "dispatch/" + id, Details: d("bytes_up", int64(1), "bytes_down", int64(2), "duration_ms", int64(3), "requests", 4)},
			audit.Entry{Actor: actor, Kind: entry.NetClose, Subject: entry.Dispatch(id), Details: d(entry.KeyBytesUp, int64(1), entry.KeyBytesDown, int64(2), entry.KeyDurationMS, int64(3), entry.KeyRequests, 4)}},
		{"mcp tool call",
			audit.Entry{Actor: "client", Kind: "mcp.tool.call", Subject: "mcp/agora_dispatch", Details: d("tool", "agora_dispatch", "decision", "allowed", "ceiling", "write")},
			audit.Entry{Actor: "client", Kind: entry.MCPToolCall, Subject: entry.MCPTool("agora_dispatch"), Details: d(entry.KeyTool, "agora_dispatch", entry.KeyDecision, "allowed", "ceiling", "write")}},
		{"mcp tool denied",
			audit.Entry{Actor: "client", Kind: "mcp.tool.denied", Subject: "mcp/agora_dispatch", Details: d("tool", "agora_dispatch", "decision", "denied")},
			audit.Entry{Actor: "client", Kind: entry.MCPToolDenied, Subject: entry.MCPTool("agora_dispatch"), Details: d(entry.KeyTool, "agora_dispatch", entry.KeyDecision, "denied")}},
		{"mcp resource read",
			audit.Entry{Actor: "client", Kind: "mcp.resource.read", Subject: "mcp/resource", Details: d("decision", "allowed")},
			audit.Entry{Actor: "client", Kind: entry.MCPResourceRead, Subject: entry.MCPResource, Details: d(entry.KeyDecision, "allowed")}},
		{"mcp resource denied",
			audit.Entry{Actor: "client", Kind: "mcp.resource.denied", Subject: "mcp/resource", Details: d("decision", "denied")},
			audit.Entry{Actor: "client", Kind: entry.MCPResourceDenied, Subject: entry.MCPResource, Details: d(entry.KeyDecision, "denied")}},
		{"schedule added",
			audit.Entry{Actor: "orch", Kind: "orch.schedule.added", Subject: "schedule/nightly", Details: d("by", "alice")},
			audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleAdded, Subject: entry.Schedule("nightly"), Details: d(entry.KeyBy, "alice")}},
		{"schedule removed",
			audit.Entry{Actor: "orch", Kind: "orch.schedule.removed", Subject: "schedule/nightly"},
			audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleRemoved, Subject: entry.Schedule("nightly")}},
		{"schedule fired",
			audit.Entry{Actor: "orch", Kind: "orch.schedule.fired", Subject: "schedule/nightly"},
			audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleFired, Subject: entry.Schedule("nightly")}},
		{"schedule missed",
			audit.Entry{Actor: "orch", Kind: "orch.schedule.missed", Subject: "schedule/nightly"},
			audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleMissed, Subject: entry.Schedule("nightly")}},
		{"schedule refused",
			audit.Entry{Actor: "orch", Kind: "orch.schedule.refused", Subject: "schedule/nightly"},
			audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleRefused, Subject: entry.Schedule("nightly")}},
	}
}

// orchCases is every orchestrator kind, as the engine writes it: subject run/ID or
// run/ID/task/T, details with run_name.
func orchCases() []golden {
	const run, task = "r-1", "t-1"
	type k struct {
		old, new string
		task     bool
	}
	var out []golden
	for _, c := range []k{
		{"orch.run.submitted", entry.RunSubmitted, false}, {"orch.run.extended", entry.RunExtended, false},
		{"orch.run.state", entry.RunState, false}, {"orch.run.ended", entry.RunEnded, false},
		{"orch.run.seal_requested", entry.RunSealRequested, false}, {"orch.run.sealed", entry.RunSealed, false},
		{"orch.run.cancel_requested", entry.RunCancelRequested, false},
		{"orch.task.ready", entry.TaskReady, true}, {"orch.task.fired", entry.TaskFired, true},
		{"orch.task.succeeded", entry.TaskSucceeded, true}, {"orch.task.failed", entry.TaskFailed, true},
		{"orch.task.cancelled", entry.TaskCancelled, true}, {"orch.task.needs_input", entry.TaskNeedsInput, true},
		{"orch.task.retry_scheduled", entry.TaskRetryScheduled, true}, {"orch.task.skipped", entry.TaskSkipped, true},
		{"orch.task.unskipped", entry.TaskUnskipped, true}, {"orch.task.verified", entry.TaskVerified, true},
		{"orch.task.produced", entry.TaskProduced, true}, {"orch.task.reviewed", entry.TaskReviewed, true},
		{"orch.task.rejected", entry.TaskRejected, true}, {"orch.task.answered", entry.TaskAnswered, true},
		{"orch.task.retried", entry.TaskRetried, true}, {"orch.task.cancel_requested", entry.TaskCancelRequested, true},
	} {
		oldSub, newSub := "run/"+run, entry.Run(run)
		if c.task {
			oldSub, newSub = "run/"+run+"/task/"+task, entry.Task(run, task)
		}
		out = append(out, golden{c.old,
			audit.Entry{Actor: "orch", Kind: c.old, Subject: oldSub,
				Details: d("run_name", "nightly", "dispatch_id", "d-1", "reason", "x", "state", "failed", "plan_digest", "sha256:aa",
					"entries", int64(7), "attempt", int64(2), "trace_id", "0af7", "tasks", int64(3), "subagent", "fixer")},
			audit.Entry{Actor: entry.OrchActor, Kind: c.new, Subject: newSub,
				Details: d(entry.KeyRunName, "nightly", entry.KeyDispatchID, "d-1", entry.KeyReason, "x", entry.KeyState, "failed",
					entry.KeyPlanDigest, "sha256:aa", entry.KeyEntries, int64(7), entry.KeyAttempt, int64(2), entry.KeyTraceID, "0af7",
					entry.KeyTasks, int64(3), entry.KeySubagent, "fixer")}})
	}
	// Kinds added after the golden log was first written go last, so its earlier bytes stay.
	out = append(out, golden{"schedule clock back",
		audit.Entry{Actor: "orch", Kind: "orch.schedule.clock_back", Subject: "schedule/nightly"},
		audit.Entry{Actor: entry.OrchActor, Kind: entry.ScheduleClockBack, Subject: entry.Schedule("nightly")}})
	return out
}

// writeLog appends entries one transaction each under a fixed clock and returns the stored
// bytes of each, with the database.
func writeLog(t *testing.T, entries []audit.Entry) (*store.DB, [][]byte) {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	n := 0
	l := audit.New(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return time.Date(2026, 11, 24, 1, 2, 3, n*1000, time.UTC)
	})
	for _, e := range entries {
		if err := db.Tx(t.Context(), func(tx *sql.Tx) error { _, err := l.Append(t.Context(), tx, e); return err }); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.SQL().QueryContext(t.Context(), `SELECT entry FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return db, out
}

func readGolden(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGolden_NewBuildersWriteTheOldBytes: a log written by the old code (testdata) and the
// same entries built from this package are the same bytes, entry for entry, and the log
// verifies as `agora verify` verifies a bundle.
func TestGolden_NewBuildersWriteTheOldBytes(t *testing.T) {
	all := append(cases(), orchCases()...)
	var olds, news []audit.Entry
	for _, c := range all {
		olds, news = append(olds, c.old), append(news, c.new)
	}
	if *update {
		_, old := writeLog(t, olds)
		var buf bytes.Buffer
		for _, b := range old {
			buf.Write(b)
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(goldenPath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readGolden(t)
	db, got := writeLog(t, news)
	if len(got) != len(want) {
		t.Fatalf("got %d entries, testdata holds %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: the new builders write\n%s\nthe old code wrote\n%s", all[i].name, got[i], want[i])
		}
	}
	s, vkey := audittest.NewKey(t)
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: "agora.db", Signer: s, VerifierKey: vkey, Every: 1000, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := cp.Export(t.Context(), audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if err := verify.WriteBundle(&file, b); err != nil {
		t.Fatal(err)
	}
	parsed, err := verify.ParseBundle(&file)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range parsed.Entries {
		if !bytes.Equal(e.Entry, want[i]) {
			t.Errorf("bundle entry %d is not the old bytes", i)
		}
	}
	if rep := verify.Verify(parsed, verify.Options{Key: vkey}); !rep.OK {
		var failed []string
		for _, r := range rep.Failed() {
			failed = append(failed, r.Check+": "+r.Detail)
		}
		t.Errorf("verify of the log failed: %s", strings.Join(failed, "; "))
	}
	agoraVerify(t, b, vkey)
}

// agoraVerify runs the real `agora verify` on bundle b: it must pass (exit 0), and fail
// (exit non-zero) once one byte of one entry is changed, so the pass is not vacuous.
func agoraVerify(t *testing.T, b *verify.Bundle, vkey string) {
	t.Helper()
	bin, cleanup, err := agoratest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.pub")
	if err := os.WriteFile(keyFile, []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b *verify.Bundle) string {
		var buf bytes.Buffer
		if err := verify.WriteBundle(&buf, b); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, err := exec.Command(bin, "verify", "--key", keyFile, write("old.bundle", b)).CombinedOutput(); err != nil {
		t.Errorf("agora verify of the old log: %v\n%s", err, out)
	}
	tampered := *b
	tampered.Entries = slices.Clone(b.Entries)
	e := tampered.Entries[3]
	e.Entry = bytes.Replace(e.Entry, []byte(`"kind":"catalog.apply"`), []byte(`"kind":"catalog.applz"`), 1)
	tampered.Entries[3] = e
	if out, err := exec.Command(bin, "verify", "--key", keyFile, write("tampered.bundle", &tampered)).CombinedOutput(); err == nil {
		t.Errorf("agora verify passed a bundle with a changed entry:\n%s", out)
	}
}

// TestGolden_EveryKindCovered: each kind constant of this package has an entry in the golden
// log, so a constant changed in value fails the byte comparison.
func TestGolden_EveryKindCovered(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range append(append(cases(), orchCases()...), learnCases()...) {
		seen[c.new.Kind] = true
	}
	for _, k := range entry.Kinds() {
		if !seen[k] {
			t.Errorf("kind %q has no golden entry", k)
		}
	}
}
