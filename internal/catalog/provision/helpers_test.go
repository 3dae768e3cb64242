package provision_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/home"
)

// fixture is a real AGORA_HOME in a temp dir with a writer over it.
type fixture struct {
	h *home.Home
	w *provision.Writer
	r *view.Catalog
}

// newFixture opens a fresh AGORA_HOME. home refuses an existing directory that group or
// others can read, and t.TempDir() is 0755, so the home is a directory home.Open creates.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	return openFixture(t, filepath.Join(t.TempDir(), "home"))
}

func openFixture(t testing.TB, dir string) *fixture {
	t.Helper()
	h, err := home.Open(context.Background(), dir, agoradb.Migrations())
	if err != nil {
		t.Fatalf("home.Open: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	w, err := newWriter(h)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{h: h, w: w, r: w.Reader()}
}

func newWriter(h *home.Home) (*provision.Writer, error) {
	sealer, err := h.Sealer()
	if err != nil {
		return nil, err
	}
	return provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{}), nil
}

// count runs a COUNT(*) query.
func (f *fixture) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.h.DB.SQL().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f *fixture) auditCount(t testing.TB) int {
	return f.count(t, `SELECT COUNT(*) FROM audit_entries`)
}

func (f *fixture) historyCount(t testing.TB) int {
	return f.count(t, `SELECT COUNT(*) FROM catalog_history`)
}

// auditKinds lists the kind and subject of every audit entry from seq on.
func (f *fixture) auditKinds(t testing.TB, from int) []string {
	t.Helper()
	rows, err := f.h.DB.SQL().Query(`SELECT kind, subject FROM audit_entries WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, s string
		if err := rows.Scan(&k, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, k+" "+s)
	}
	return out
}

// capDir writes files (path -> content) into a fresh directory and returns it.
func capDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) registerCap(t testing.TB, name, dir string) (provision.Change, catalog.Version) {
	t.Helper()
	p, err := f.w.PrepareCapability(name, dir, nil)
	if err != nil {
		t.Fatalf("PrepareCapability %s: %v", name, err)
	}
	c, v, err := f.w.Register(context.Background(), "tester", "register", p)
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
	return c, v
}

func (f *fixture) registerEnv(t testing.TB, name string, values map[string]string, secrets map[string][]byte) (provision.Change, catalog.Version) {
	t.Helper()
	p, err := f.w.PrepareEnv(name, values, secrets, nil)
	if err != nil {
		t.Fatalf("PrepareEnv %s: %v", name, err)
	}
	c, v, err := f.w.Register(context.Background(), "tester", "register", p)
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
	return c, v
}

func (f *fixture) registerSubagent(t testing.TB, name string, spec provision.SubagentSpec) (provision.Change, catalog.Version) {
	t.Helper()
	p, err := f.w.PrepareSubagent(context.Background(), name, spec, nil, nil)
	if err != nil {
		t.Fatalf("PrepareSubagent %s: %v", name, err)
	}
	c, v, err := f.w.Register(context.Background(), "tester", "register", p)
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
	return c, v
}

// history returns "action digest" for every event of name.
func (f *fixture) history(t testing.TB, kind catalog.Kind, name string) []string {
	t.Helper()
	evs, err := f.r.History(context.Background(), kind, name)
	if err != nil {
		t.Fatalf("History %s: %v", name, err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s", e.Action, e.Digest))
	}
	return out
}
