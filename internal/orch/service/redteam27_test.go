package service_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestRedTeam27_BundleMissingExtensionOrVerdict: a run whose fan-out added tasks and whose
// producer passed a verify gate is exported with `agora orch audit`; the bundle verifies.
// With its orch.run.extended entry (the tasks' cause) or its orch.task.verified entry (the
// gate's verdict) deleted and the orch part's count lowered to match, `agora verify` exits 5,
// also when the key holder re-signs the orch selection.
func TestRedTeam27_BundleMissingExtensionOrVerdict(t *testing.T) {
	e := servedEnv(t)
	e.fanOutCatalog(3)
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: rt27
tasks:
  - {id: split, subagent: splitter, verify: {command: ["true"]}}
  - id: each
    fan_out: {from: split, select: "output:items.json", template: {subagent: part}}
`), 0o644))
	e.run("orch", "submit", planPath, "--wait")
	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", "rt27", "--out", out)
	pub := filepath.Join(e.home, "keys", "audit.pub")
	if code, stdout := verifyFile(t, out, pub); code != 0 {
		t.Fatalf("untouched bundle: exit %d\n%s", code, stdout)
	}
	raw, err := os.ReadFile(out)
	must(t, err)
	skey, err := os.ReadFile(filepath.Join(e.home, "keys", "audit.key"))
	must(t, err)
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	must(t, err)
	for _, kind := range []string{"orch.run.extended", "orch.task.verified"} {
		for _, resign := range []bool{false, true} {
			b, err := verify.ParseRunBundle(bytes.NewReader(raw))
			must(t, err)
			var kept []verify.Entry
			for _, x := range b.Orch.Entries {
				f, err := verify.DecodeEntry(x.Entry)
				must(t, err)
				if f.Kind != kind {
					kept = append(kept, x)
				}
			}
			if len(kept) != len(b.Orch.Entries)-1 {
				t.Fatalf("the bundle holds %d %s entries, want 1", len(b.Orch.Entries)-len(kept), kind)
			}
			b.Orch.Entries, b.Orch.Selection.Count = kept, len(kept)
			if resign {
				must(t, verify.SignSelection(b.Orch, signer))
			}
			var buf bytes.Buffer
			must(t, verify.WriteRunBundle(&buf, b))
			path := filepath.Join(t.TempDir(), "tampered.json")
			must(t, os.WriteFile(path, buf.Bytes(), 0o600))
			code, stdout := verifyFile(t, path, pub)
			t.Logf("%s re-signed %v: %s", kind, resign, failedRows(stdout))
			if code != 5 {
				t.Errorf("%s deleted (re-signed %v): agora verify exit %d, want 5\n%s", kind, resign, code, stdout)
			}
		}
	}
}

// failedRows are the rows agora verify printed as FAIL.
func failedRows(stdout string) []string {
	var rows []string
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 && f[1] == "FAIL" {
			rows = append(rows, f[0]+": "+f[2])
		}
	}
	return rows
}
