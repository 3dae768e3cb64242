package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedTeam2_AgentMakesRunBundleUnverifiable: a hostile agent poisons its run's audit.
//
// Attack: an `exec` agent (any agent with a shell, or a hostile repository's `make` target)
// leaves 250 output files whose paths are ~4 KiB each and made of '"' characters, which
// RFC 8785 escapes to two bytes. Everything on the way accepts it: each path is under the
// worker's 4096-byte cap, 250 files are under MaxOutputs (256), the dispatch ends `finished`
// and orch.db records the task succeeded. But the dispatch manifest that lists those outputs
// is ~2 MB, and `agora verify` refuses any manifest over 1 MiB (verify.maxManifestBytes) in
// the `manifest binding` row.
//
// Impact: the run bundle of that run fails `agora verify` (exit 5, tier none) however often
// it is exported, and nothing tells the operator it was the agent rather than tampering:
// one task of a run is enough to make the whole run's audit evidence unverifiable for good
// (the run is sealed before export). The audit is a weapon in the agent's hands.
//
// Now: the worker caps the output names at wire.MaxOutputNames (64 KiB in all), so the
// hostile task fails worker-failed naming the limit, and the run's bundle verifies.
func TestRedTeam2_AgentMakesRunBundleUnverifiable(t *testing.T) {
	e := servedEnv(t)
	// servedEnv registered shell and worker; this adds the hostile subagent beside them.
	cat := filepath.Join(t.TempDir(), "catalog2")
	must(t, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(t, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte("description: a shell\ncommands: [\"sh -c *\"]\n"), 0o644))
	// 15 directories named by 250 '"' and 250 files (N followed by 250 '"') below them: each
	// output path is about 4030 bytes, under the worker's 4096.
	must(t, os.WriteFile(filepath.Join(cat, "filler.yaml"), []byte(`description: leaves long output names
runtime: exec
command:
  - sh
  - -c
  - |
    q=$(printf '%0250d' 0 | tr 0 '"')
    d=/agora/out/outputs
    i=0; while [ $i -lt 15 ]; do d="$d/$q"; i=$((i+1)); done
    mkdir -p "$d"
    i=0; while [ $i -lt 250 ]; do printf x > "$d/$i$q"; i=$((i+1)); done
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte(`version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: filler, from: filler.yaml}
`), 0o644))
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))

	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: poisoned\ntasks:\n  - {id: honest, subagent: worker, input: {n: 1}}\n  - {id: hostile, subagent: filler, input: {n: 2}}\n"), 0o644))
	submit := exec.Command(agoraBin, "orch", "submit", planPath, "--wait")
	submit.Env = e.vars
	submit.CombinedOutput() // the run fails: its hostile task does
	status := e.run("orch", "status", "poisoned")
	if !strings.Contains(status, "failed") || !strings.Contains(status, "names under outputs/") {
		t.Fatalf("the hostile task did not fail on the names limit:\n%s", status)
	}
	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", "poisoned", "--out", out)
	code, stdout := verifyFile(t, out, filepath.Join(e.home, "keys", "audit.pub"))
	if code != 0 {
		t.Fatalf("the run bundle of a run with a hostile task does not verify (exit %d):\n%s", code, stdout)
	}
}
