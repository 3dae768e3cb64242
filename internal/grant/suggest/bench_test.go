package suggest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
	"github.com/agora-dev/agora/internal/home"
)

// benchTasks is the run size of the target: suggest over a 1,000-task run in at most 2 s.
const benchTasks = 1000

// benchHome is a real agora.db with one exec subagent ("worker") and tasks dispatches of it, each
// with the entries a learn dispatch of a small task leaves: its accepted entry, a terminated
// connection, a refused and a would-deny request, a learn host's connection (its would-deny
// and its net.connect), two would-deny tools, an allowed tool call and a connection's close.
func benchHome(b testing.TB, tasks int) (suggest.Source, []string) {
	b.Helper()
	ctx := b.Context()
	h, err := home.Open(ctx, filepath.Join(b.TempDir(), "home"), agoradb.Migrations())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	sealer, err := h.Sealer()
	if err != nil {
		b.Fatal(err)
	}
	w := provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{})
	capDir := b.TempDir()
	yaml := "tools: [run_command]\ncommands: [\"make test\"]\negress:\n  - {host: api.example.com, port: 443, methods: [GET], paths: [/repos/acme/]}\n"
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	pc, err := w.PrepareCapability("tools", capDir, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := w.Register(ctx, "bench", "register", pc); err != nil {
		b.Fatal(err)
	}
	ps, err := w.PrepareSubagent(ctx, "worker", provision.SubagentSpec{Runtime: "exec", Command: []string{"make", "test"}, Capabilities: []string{"tools"}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, v, err := w.Register(ctx, "bench", "register", ps)
	if err != nil {
		b.Fatal(err)
	}
	g := grant.Set{Tools: []string{"run_command"}, Commands: []string{"make test"},
		Egress: []grant.EgressRule{{Host: "api.example.com", Port: 443, Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}}
	recs := dispatch.NewRecords(h.DB, audit.New(nil), nil)
	ids := make([]string, tasks)
	var ents []audit.Entry
	for i := range ids {
		ids[i] = fmt.Sprintf("d-%04d", i)
		if err := recs.Accept(ctx, &dispatch.Record{ID: ids[i], Subagent: "worker", SubagentDigest: v.Digest, Grants: &g, Learn: true,
			Target: "local", RunID: "r-1", TaskID: fmt.Sprintf("t%d", i)}); err != nil {
			b.Fatal(err)
		}
		ents = append(ents, taskEntries(ids[i], i)...)
	}
	if err := h.DB.Tx(ctx, func(tx *sql.Tx) error { _, err := audit.New(nil).AppendAll(ctx, tx, ents); return err }); err != nil {
		b.Fatal(err)
	}
	return suggest.Source{DB: h.DB, Catalog: view.New(h.DB, h.Blobs)}, ids
}

func taskEntries(id string, i int) []audit.Entry {
	actor, subject := entry.GatewayActor(id, "subagent@sha256:ab"), entry.Dispatch(id)
	e := func(kind string, d map[string]any) audit.Entry {
		return audit.Entry{Actor: actor, Kind: kind, Subject: subject, Details: d}
	}
	return []audit.Entry{
		e(entry.NetConnect, map[string]any{entry.KeyHost: "api.example.com", entry.KeyPort: 443, entry.KeyDecision: "allow", entry.KeyVia: "connect", "terminated": true}),
		e(entry.NetRequest, map[string]any{entry.KeyHost: "api.example.com", entry.KeyPort: 443, entry.KeyMethod: "POST", entry.KeyPath: fmt.Sprintf("/repos/acme/%d/issues", i%50), entry.KeyDecision: "deny", entry.KeyReason: "method"}),
		e(entry.NetWouldDeny, map[string]any{entry.KeyHost: "proxy.golang.org", entry.KeyPort: 443, entry.KeyReason: "host", entry.KeyVia: "connect"}),
		e(entry.NetConnect, map[string]any{entry.KeyHost: "proxy.golang.org", entry.KeyPort: 443, entry.KeyDecision: "allow", entry.KeyVia: "connect"}),
		e(entry.NetWouldDeny, map[string]any{entry.KeyHost: "api.example.com", entry.KeyPort: 443, entry.KeyMethod: "GET", entry.KeyPath: fmt.Sprintf("/orgs/acme/%d", i%7)}),
		e(entry.ToolWouldDeny, map[string]any{entry.KeyTool: "run_command", entry.KeyCommand: fmt.Sprintf("go test ./pkg/p%d", i%20), entry.KeyReason: "command", entry.KeyReporter: "worker"}),
		e(entry.ToolWouldDeny, map[string]any{entry.KeyTool: "read_file", entry.KeyReason: "tool", entry.KeyReporter: "worker"}),
		e(entry.ToolCall, map[string]any{entry.KeyTool: "run_command", entry.KeyDecision: "allowed", "args_hash": "sha256:00"}),
		e(entry.NetClose, map[string]any{entry.KeyHost: "api.example.com", entry.KeyPort: 443, entry.KeyBytesUp: 10, entry.KeyBytesDown: 10}),
	}
}

// BenchmarkSuggest_Run is `agora capability suggest` over a 1,000-task run, after the run's
// dispatch ids are known: read every record and entry, propose, and write the YAML (read back
// by the catalog's parser). The target is 2 s.
func BenchmarkSuggest_Run(b *testing.B) {
	src, ids := benchHome(b, benchTasks)
	ctx := context.Background()
	for b.Loop() {
		g, err := src.Gather(ctx, ids)
		if err != nil {
			b.Fatal(err)
		}
		p, err := suggest.Propose(g.Evidence, g.Current, suggest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.YAML(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSuggest_ReadBaseline is the floor suggest stands on, measured in the same run: the
// same records and audit entries read the way `agora dispatch describe` and `agora audit log`
// read them, and nothing proposed.
func BenchmarkSuggest_ReadBaseline(b *testing.B) {
	src, ids := benchHome(b, benchTasks)
	ctx := context.Background()
	recs := dispatch.NewRecords(src.DB, nil, nil)
	for b.Loop() {
		n := 0
		for _, id := range ids {
			if _, err := recs.Get(ctx, id); err != nil {
				b.Fatal(err)
			}
			ents, err := audit.List(ctx, src.DB.SQL(), audit.ListOptions{Subject: entry.Dispatch(id)})
			if err != nil {
				b.Fatal(err)
			}
			n += len(ents)
		}
		if n != benchTasks*10 {
			b.Fatalf("read %d entries, want %d", n, benchTasks*10)
		}
	}
}

func TestGather(t *testing.T) {
	src, ids := benchHome(t, 3)
	ctx := t.Context()
	g, err := src.Gather(ctx, append(ids, ids[0])) // an id given twice is read once
	if err != nil {
		t.Fatal(err)
	}
	p, err := suggest.Propose(g.Evidence, g.Current, suggest.Options{Narrow: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Dispatches != 3 || g.Subagent != "worker" || len(g.Unended) != 3 {
		t.Errorf("read %d dispatches of %q, %d unended; want 3 of worker, 3", p.Dispatches, g.Subagent, len(g.Unended))
	}
	// The exec subagent's command is evidence; so are the learn entries.
	for _, want := range []string{"make test", "go test ./pkg/p0", "go test ./pkg/p2"} {
		if !slices.Contains(p.Grant.Commands, want) {
			t.Errorf("commands %q lack %q", p.Grant.Commands, want)
		}
	}
	if !grant.HostGranted(p.Grant.Egress, "proxy.golang.org", 443) || grant.HostGranted(p.Grant.Egress, "proxy.golang.org", 80) {
		t.Errorf("egress %v: want proxy.golang.org:443 only", p.Grant.Egress)
	}
	if _, err := src.Gather(ctx, []string{"d-9999"}); err == nil {
		t.Error("gathered an unknown dispatch")
	}
	// One subagent at a time: a dispatch of another is refused, naming both.
	other := &dispatch.Record{ID: "d-other", Subagent: "other", Target: "local"}
	if err := dispatch.NewRecords(src.DB, audit.New(nil), nil).Accept(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Gather(ctx, []string{ids[0], "d-other"}); err == nil || !strings.Contains(err.Error(), `subagent "other", not "worker"`) {
		t.Errorf("mixed subagents: %v", err)
	}
}
