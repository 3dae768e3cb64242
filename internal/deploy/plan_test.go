package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/deploy"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/strictyaml"
)

func newWriter(t *testing.T) (*home.Home, *provision.Writer) {
	t.Helper()
	h, err := home.Open(context.Background(), filepath.Join(t.TempDir(), "home"), agoradb.Migrations())
	if err != nil {
		t.Fatalf("home.Open: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	return h, provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{})
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const exampleManifest = `version: 1
capabilities:
  - name: repo-tools
    from: caps/repo-tools
subagents:
  - name: reviewer
    runtime: claude-code
    prompt_file: prompts/reviewer.md
    capabilities: [repo-tools]
  - name: runner
    from: subagents/runner.yaml
envs:
  - name: deploy
    values: {REGION: eu-west-1}
    secrets:
      TOKEN: {from_env: DEPLOY_TOKEN}
      KEY: {from_file: secrets/key.txt}
`

func exampleDir(t *testing.T) string {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"agora-manifest.yaml":             exampleManifest,
		"caps/repo-tools/capability.yaml": "tools: [read_file]\n",
		"caps/repo-tools/bin/run.sh":      "#!/bin/sh\n",
		"prompts/reviewer.md":             "You review code.\n",
		"subagents/runner.yaml":           "command: [make, test]\ncapabilities: [repo-tools]\nprompt_file: runner.md\n",
		"subagents/runner.md":             "Run the tests.\n",
		"secrets/key.txt":                 "file-secret-value\r\n",
	})
	return dir
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestSource_PrepareAndApply(t *testing.T) {
	h, w := newWriter(t)
	ctx := t.Context()
	dir := exampleDir(t)
	src, err := deploy.Load(filepath.Join(dir, "agora-manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pendings, err := src.Prepare(ctx, w, getenv(map[string]string{"DEPLOY_TOKEN": "env-secret-value"}))
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	var order []string
	for _, p := range pendings {
		order = append(order, string(p.Kind)+" "+p.Name)
	}
	if diff := cmp.Diff([]string{"capability repo-tools", "subagent reviewer", "subagent runner", "env deploy"}, order); diff != "" {
		t.Errorf("pending order mismatch (-want +got):\n%s", diff)
	}
	// A subagent naming a capability declared in the same manifest pins its pending digest.
	capDigest := pendings[0].Digest
	for _, p := range pendings[1:3] {
		if diff := cmp.Diff([]catalog.Pin{{Name: "repo-tools", Digest: capDigest}}, p.Meta.Capabilities); diff != "" {
			t.Errorf("%s pins mismatch (-want +got):\n%s", p.Name, diff)
		}
	}
	reviewer, err := catalog.ParseSubagentDoc(pendings[1].Content)
	if err != nil || reviewer.SystemPrompt != "You review code.\n" {
		t.Errorf("reviewer prompt = %q, %v; want the prompt file's content", reviewer.SystemPrompt, err)
	}
	runner, err := catalog.ParseSubagentDoc(pendings[2].Content)
	if err != nil || runner.SystemPrompt != "Run the tests.\n" || !cmp.Equal(runner.Command, []string{"make", "test"}) {
		t.Errorf("runner = %+v, %v; want fields from its file, prompt relative to it", runner, err)
	}

	changes, err := w.Plan(ctx, pendings, false)
	if err != nil {
		t.Fatal(err)
	}
	done, err := w.Apply(ctx, "ci", "apply", changes, src.Summary("ci", changes, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range done {
		if c.Action != catalog.ActionCreate {
			t.Errorf("first apply: %s %s is %s, want create", c.Kind, c.Name, c.Action)
		}
	}
	var audits int
	h.DB.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries`).Scan(&audits)
	if audits != len(done)+1 {
		t.Errorf("audit entries = %d, want one per change plus the summary (%d)", audits, len(done)+1)
	}
	var summary string
	h.DB.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE kind = 'catalog.apply'`).Scan(&summary)
	for _, want := range []string{`"changes":{"create":4}`, `"manifest_digest":"` + string(src.Digest) + `"`, `"subject":"manifest/agora-manifest.yaml"`} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary entry %s lacks %s", summary, want)
		}
	}

	// from_file is read relative to the manifest, without its trailing newline.
	r := w.Reader()
	env, err := r.Resolve(ctx, catalog.KindEnv, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	content, _ := r.Content(env)
	doc, _ := catalog.ParseEnvDoc(content)
	sealer, _ := h.Sealer()
	for key, want := range map[string]string{"KEY": "file-secret-value", "TOKEN": "env-secret-value"} {
		sealed, err := r.Sealed(ctx, doc.Secrets[key])
		if err != nil {
			t.Fatalf("sealed %s: %v", key, err)
		}
		if got, err := sealer.Open(doc.Secrets[key], sealed); err != nil || string(got) != want {
			t.Errorf("secret %s = %q, %v; want %q", key, got, err, want)
		}
	}

	// A second apply of the same manifest has nothing to do.
	src2, err := deploy.Load(filepath.Join(dir, "agora-manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pendings2, err := src2.Prepare(ctx, w, getenv(map[string]string{"DEPLOY_TOKEN": "env-secret-value"}))
	if err != nil {
		t.Fatal(err)
	}
	changes2, err := w.Plan(ctx, pendings2, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes2 {
		if c.Action != catalog.ActionUnchanged {
			t.Errorf("second plan: %s %s is %s, want unchanged", c.Kind, c.Name, c.Action)
		}
	}
}

func TestSource_PrepareReportsEveryEntry(t *testing.T) {
	_, w := newWriter(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": `version: 1
capabilities:
  - name: good
    from: caps/good
  - name: badgrants
    from: caps/bad
  - name: missing
    from: caps/missing
subagents:
  - name: nocap
    command: [x]
    capabilities: [nope]
  - name: noprompt
    runtime: claude-code
    prompt_file: prompts/missing.md
envs:
  - name: e
    secrets:
      FROM_ENV: {from_env: UNSET_VAR}
      FROM_FILE: {from_file: secrets/none.txt}
  - name: leaky
    values: {GH: "ghp_` + strings.Repeat("a1B2", 9) + `"}
`,
		"caps/good/f.txt":          "ok\n",
		"caps/bad/capability.yaml": "tools: [nope]\n",
	})
	src, err := deploy.Load(filepath.Join(dir, "m.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Prepare(t.Context(), w, getenv(nil))
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Prepare = %v, want strictyaml.Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Path)
	}
	want := []string{"tools[0]", "capabilities[2]", "subagents[0]", "subagents[1]", "envs[0].secrets.FROM_ENV", "envs[0].secrets.FROM_FILE", "envs[1]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error paths mismatch (-want +got):\n%s\nerrors:\n%v", diff, err)
	}
	msg := err.Error()
	for _, w := range []string{
		filepath.Join(dir, "caps/bad/capability.yaml") + `:1: tools[0]: unknown tool "nope"`,
		filepath.Join(dir, "m.yaml") + ":7: capabilities[2]: read capability directory",
		`subagents[0]: subagent "nocap": capability "nope" not found`,
		"envs[0].secrets.FROM_ENV: from_env: the environment variable UNSET_VAR is unset or empty",
		"envs[0].secrets.FROM_FILE: from_file: ",
		"value GH:1: github-token (ghp_...)",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("Prepare errors lack %q:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, strings.Repeat("a1B2", 3)) {
		t.Errorf("Prepare errors echo the token:\n%s", msg)
	}
}

func TestLoad_Errors(t *testing.T) {
	dir := t.TempDir()
	if _, err := deploy.Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read manifest") {
		t.Errorf("Load(missing) = %v", err)
	}
	p := filepath.Join(dir, "m.yaml")
	writeTree(t, dir, map[string]string{"m.yaml": "version: 1\nbogus: 1\n"})
	_, err := deploy.Load(p)
	if err == nil || !strings.Contains(err.Error(), p+`:2: bogus: unknown field "bogus"`) {
		t.Errorf("Load(bad) = %v", err)
	}
}

// TestCheck_BoundsTheReport: a manifest with more problems than anyone reads lists the first
// MaxErrors in document order and counts the rest, after them.
func TestCheck_BoundsTheReport(t *testing.T) {
	_, w := newWriter(t)
	dir := t.TempDir()
	var m strings.Builder
	m.WriteString("version: 1\ncapabilities:\n")
	for i := range 60 {
		// Each one missing: its directory is not there (a catalog-side problem, found by
		// preparing it), so the decoder's own limit is not what stops the list.
		fmt.Fprintf(&m, "  - {name: gone-%d, from: caps/gone-%d}\n", i, i)
	}
	m.WriteString("subagents:\n")
	for i := range 60 {
		fmt.Fprintf(&m, "  - {name: s-%d, runtime: exec, command: [sh], capabilities: [nope-%d]}\n", i, i)
	}
	writeTree(t, dir, map[string]string{"agora-manifest.yaml": m.String()})
	_, _, err := deploy.Check(t.Context(), filepath.Join(dir, "agora-manifest.yaml"), w, getenv(nil))
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Check = %v, want strictyaml.Errors", err)
	}
	if len(es) != deploy.MaxErrors+1 {
		t.Fatalf("got %d problems, want %d listed and the count:\n%v", len(es), deploy.MaxErrors, err)
	}
	if !strings.HasPrefix(es[0].Path, "capabilities[0]") || !strings.HasPrefix(es[deploy.MaxErrors-1].Path, "subagents[39]") {
		t.Errorf("not the first problems in document order: %s ... %s", es[0].Path, es[deploy.MaxErrors-1].Path)
	}
	if last := es[len(es)-1]; last.Path != "" || !strings.HasPrefix(last.Msg, "and 20 more problems not listed") {
		t.Errorf("last = %+v, want the count of the other 20", last)
	}
}
