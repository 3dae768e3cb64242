package ccimport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/runtime/claudert"
)

// newWriter opens a real AGORA_HOME in a temp dir and a catalog writer over it.
func newWriter(t testing.TB) (*home.Home, *provision.Writer) {
	t.Helper()
	h, err := home.Open(t.Context(), filepath.Join(t.TempDir(), "home"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	return h, provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{})
}

// importDir loads dir and applies it as 'agora subagent import' does, returning the changes.
func importDir(t testing.TB, w *provision.Writer, dir string) ([]provision.Change, error) {
	t.Helper()
	s, err := Load(dir, nil)
	if err != nil {
		return nil, err
	}
	pendings, err := s.Prepare(t.Context(), w, nil, nil)
	if err != nil {
		return nil, err
	}
	changes, err := w.Plan(t.Context(), pendings, false)
	if err != nil {
		return nil, err
	}
	return w.Apply(t.Context(), "tester", "import", changes, s.Summary("tester", changes))
}

func count(t testing.TB, h *home.Home, query string) int {
	t.Helper()
	var n int
	if err := h.DB.SQL().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPrepare_RegistersAndIsIdempotent(t *testing.T) {
	h, w := newWriter(t)
	dir := writeTree(t, map[string]string{"reviewer.md": reviewer, "fixer.md": agentFile("fixer", "Edit, Bash(go test:*)")})
	changes, err := importDir(t, w, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 4 {
		t.Fatalf("changes = %+v, want a capability and a subagent each", changes)
	}
	v, err := w.Reader().Resolve(t.Context(), catalog.KindSubagent, "code-reviewer")
	if err != nil {
		t.Fatal(err)
	}
	content, err := w.Reader().Content(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Runtime != "claude-code" || doc.Model != "sonnet" || doc.SystemPrompt != "You are a careful code reviewer.\nReport what you find." ||
		len(doc.Capabilities) != 1 || doc.Capabilities[0].Name != "code-reviewer.claude-tools" {
		t.Errorf("subagent doc = %+v", doc)
	}
	c, err := w.Reader().Resolve(t.Context(), catalog.KindCapability, "code-reviewer.claude-tools")
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != doc.Capabilities[0].Digest {
		t.Errorf("the subagent pins %s, the capability is %s", doc.Capabilities[0].Digest, c.Digest)
	}
	g := c.Meta.CapabilityDoc
	// What claude is given for this grant is what the file listed.
	tr := claudert.Grants{Set: g.Set}
	if got := strings.Join(claudert.AllowedTools(tr), " "); got != "Bash(git diff *) Read(./**)" {
		t.Errorf("claude's rules for the imported grant = %q", got)
	}
	audits, versions := count(t, h, `SELECT COUNT(*) FROM audit_entries`), count(t, h, `SELECT COUNT(*) FROM catalog_versions`)
	if audits != 5 || versions != 4 {
		t.Errorf("%d audit entries, %d versions; want 4 registrations and the import's summary, 4 versions", audits, versions)
	}
	var kinds []string
	rows, _ := h.DB.SQL().Query(`SELECT kind FROM audit_entries ORDER BY seq`)
	for rows.Next() {
		var k string
		rows.Scan(&k)
		kinds = append(kinds, k)
	}
	rows.Close()
	if got := strings.Join(kinds, " "); got != "catalog.capability.import catalog.capability.import catalog.subagent.import catalog.subagent.import catalog.import" {
		t.Errorf("audit kinds = %s", got)
	}

	// The same files again: nothing new, no entry.
	changes, err = importDir(t, w, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Action != catalog.ActionUnchanged {
			t.Errorf("re-import: %s %s %s", ch.Action, ch.Kind, ch.Name)
		}
	}
	if a, v := count(t, h, `SELECT COUNT(*) FROM audit_entries`), count(t, h, `SELECT COUNT(*) FROM catalog_versions`); a != audits+1 || v != versions {
		// Apply records its summary even with nothing to do; the CLI skips Apply then.
		t.Errorf("re-import: %d audit entries, %d versions", a, v)
	}

	// A changed prompt is a new subagent version; the capability stays.
	os.WriteFile(filepath.Join(dir, "fixer.md"), []byte(agentFile("fixer", "Edit, Bash(go test:*)")+"More.\n"), 0o644)
	changes, err = importDir(t, w, dir)
	if err != nil {
		t.Fatal(err)
	}
	var updated []string
	for _, ch := range changes {
		if ch.Action != catalog.ActionUnchanged {
			updated = append(updated, ch.Action+" "+string(ch.Kind)+" "+ch.Name)
		}
	}
	if strings.Join(updated, ",") != "update subagent fixer" {
		t.Errorf("after a prompt change: %v", updated)
	}
}

// TestPrepare_RefusesWhatItDidNotMake: an import never replaces a capability or subagent a
// person registered under the name it would use.
func TestPrepare_RefusesWhatItDidNotMake(t *testing.T) {
	_, w := newWriter(t)
	capDir := writeTree(t, map[string]string{"capability.yaml": "tools: [read_file, write_file]\n"})
	p, err := w.PrepareCapability("fixer.claude-tools", capDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Register(t.Context(), "person", "register", p); err != nil {
		t.Fatal(err)
	}
	sp, err := w.PrepareSubagent(t.Context(), "code-reviewer", provision.SubagentSpec{Runtime: "exec", Command: []string{"true"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Register(t.Context(), "person", "register", sp); err != nil {
		t.Fatal(err)
	}
	dir := writeTree(t, map[string]string{"reviewer.md": reviewer, "fixer.md": agentFile("fixer", "Read"), "ok.md": agentFile("ok", "Read")})
	_, err = importDir(t, w, dir)
	if err == nil {
		t.Fatal("the import replaced what a person registered")
	}
	for _, want := range []string{
		`fixer.md:2: name: capability "fixer.claude-tools" is registered and was not made by importing subagent "fixer"`,
		`reviewer.md:2: name: subagent "code-reviewer" is registered and was not imported`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := w.Reader().Resolve(t.Context(), catalog.KindSubagent, "ok"); err == nil {
		t.Error("a good file of a refused import was registered")
	}
}

func TestPrepare_CredentialInPrompt(t *testing.T) {
	_, w := newWriter(t)
	dir := writeTree(t, map[string]string{"leaky.md": "---\nname: leaky\ndescription: d\ntools: Read\n---\nUse the key AKIAIOSFODNN7EXAMPLE to log in.\n"})
	_, err := importDir(t, w, dir)
	if err == nil || !strings.Contains(err.Error(), "leaky.md:2: name: refusing to register") {
		t.Fatalf("a prompt holding a credential: %v", err)
	}
}
