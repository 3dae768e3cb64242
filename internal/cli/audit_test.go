package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

type runResult struct {
	code           int
	stdout, stderr string
}

// runAgora runs one command line in-process with the given environment.
func runAgora(t *testing.T, env map[string]string, args ...string) runResult {
	t.Helper()
	var out, errOut bytes.Buffer
	ios := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	f := cli.NewFactory(ios, func(k string) string { return env[k] })
	defer f.Close()
	code := cli.Run(context.Background(), f, args)
	return runResult{code, out.String(), errOut.String()}
}

// auditHome creates AGORA_HOME with an agora.yaml and a few audit entries, made by
// registering capabilities.
func auditHome(t *testing.T, yaml string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if r := runAgora(t, env, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(env["AGORA_HOME"], "agora.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"repo-tools", "web-tools", "db-tools"} {
		src := filepath.Join(dir, name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "README.md"), []byte("# "+name+"\n"), 0o644)
		if r := runAgora(t, env, "capability", "register", name, "--from", src); r.code != 0 {
			t.Fatalf("register %s: %+v", name, r)
		}
	}
	return env
}

func TestAuditLog(t *testing.T) {
	env := auditHome(t, "")
	r := runAgora(t, env, "audit", "log")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 || lines[0] != "SEQ\tTIME\tACTOR\tKIND\tSUBJECT" || !strings.HasPrefix(lines[1], "0\t") || !strings.Contains(lines[1], "capability/repo-tools") {
		t.Fatalf("audit log: code %d, stdout %q, stderr %q; want a header and 3 tab-separated rows", r.code, r.stdout, r.stderr)
	}
	r = runAgora(t, env, "audit", "log", "--kind", "catalog.*", "--since", "1h", "--output", "json")
	var entries []struct {
		Seq     int            `json:"seq"`
		Actor   string         `json:"actor"`
		Kind    string         `json:"kind"`
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 3 || entries[2].Seq != 2 || entries[0].Details == nil {
		t.Fatalf("audit log json: %v, %q", err, r.stdout)
	}
	if r := runAgora(t, env, "audit", "log", "--kind", "dispatch.*", "--output", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("no matching entries: got %q, want []", r.stdout)
	}
	if r := runAgora(t, env, "audit", "log", "--since", "yesterday"); r.code != cmdutil.ExitUsage {
		t.Errorf("bad --since: got code %d, want %d", r.code, cmdutil.ExitUsage)
	}
}

func TestAuditCheckpoint(t *testing.T) {
	dir := t.TempDir()
	anchorFile := filepath.Join(dir, "anchor.jsonl")
	env := auditHome(t, "audit:\n  anchors:\n    - {type: file, path: "+anchorFile+"}\n")
	r := runAgora(t, env, "audit", "checkpoint")
	if r.code != 0 || !strings.Contains(r.stdout, "/agora.db\n3\n") || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("checkpoint: %+v", r)
	}
	if b, err := os.ReadFile(anchorFile); err != nil || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("anchor file: %q (%v), want one record", b, err)
	}
	r = runAgora(t, env, "audit", "checkpoint", "--output", "json")
	var res struct {
		Size    int  `json:"size"`
		Created bool `json:"created"`
		Anchors []struct {
			Name string `json:"name"`
		} `json:"anchors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.Size != 3 || res.Created || len(res.Anchors) != 0 {
		t.Errorf("second checkpoint: %v %+v, want checkpoint 3, not new, no anchoring", err, r)
	}
}

func TestAuditCheckpoint_AnchorFailureExits1(t *testing.T) {
	env := auditHome(t, "audit:\n  anchors:\n    - {type: command, argv: [/bin/sh, -c, 'cat >/dev/null; exit 9']}\n")
	r := runAgora(t, env, "audit", "checkpoint")
	if r.code != cmdutil.ExitError || !strings.Contains(r.stderr, "exit status 9") || !strings.Contains(r.stdout, "\n3\n") {
		t.Errorf("got %+v, want the checkpoint printed and exit 1 naming the anchor failure", r)
	}
}

func TestAuditExport(t *testing.T) {
	env := auditHome(t, "")
	out := filepath.Join(t.TempDir(), "bundle.json")
	r := runAgora(t, env, "audit", "export", "--out", out, "--since", "1")
	if r.code != 0 || !strings.Contains(r.stderr, "exported 2 entries") {
		t.Fatalf("export: %+v", r)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode: %v (%v), want 0600 like every file agora writes", fi.Mode(), err)
	}
	if r := runAgora(t, env, "audit", "export", "--out", out); r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("export over an existing file: %+v, want a refusal naming --force", r)
	}
	if r := runAgora(t, env, "audit", "export", "--out", out, "--force", "--kind", "dispatch.*"); r.code == 0 || !strings.Contains(r.stderr, "no audit entries selected") {
		t.Errorf("export of nothing: %+v, want no audit entries selected", r)
	}
	if r := runAgora(t, env, "audit", "export"); r.code != cmdutil.ExitUsage {
		t.Errorf("export without --out: got code %d, want %d", r.code, cmdutil.ExitUsage)
	}
}
