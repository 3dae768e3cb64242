package service_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestRunBundle_ExportVerifyAndTamper runs a two-task plan (the second needs the first's
// patch), exports the run's bundle through the real CLI and service, checks it verifies
// offline, then tampers with it in every field kind and checks each is detected and named.
func TestRunBundle_ExportVerifyAndTamper(t *testing.T) {
	e := servedEnv(t)
	out := exportTwoTaskRun(t, e, "bundle")
	key, err := os.ReadFile(filepath.Join(e.home, "keys", "audit.pub"))
	must(t, err)

	// The real verifier, standalone: no AGORA_HOME.
	cmd := exec.Command(agoraBin, "verify", out, "--key", filepath.Join(e.home, "keys", "audit.pub"))
	cmd.Env = append(os.Environ(), "AGORA_HOME=/nonexistent")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "provenance") {
		t.Fatalf("verify: %v\n%s", err, b)
	}

	raw, err := os.ReadFile(out)
	must(t, err)
	load := func() *verify.RunBundle {
		b, err := verify.ParseRunBundle(bytes.NewReader(raw))
		must(t, err)
		return b
	}
	opts := verify.Options{Key: strings.TrimSpace(string(key))}
	if rep := verify.VerifyRun(load(), opts); !rep.OK {
		t.Fatalf("untouched bundle fails: %+v", rep.Failed())
	}
	tampers := []struct {
		name   string
		mutate func(b *verify.RunBundle)
		row    string // the check that must fail
	}{
		{"flip a byte of an orch entry", func(b *verify.RunBundle) { b.Orch.Entries[1].Entry[10] ^= 1 }, "orch entry"},
		{"flip a byte of a dispatch entry", func(b *verify.RunBundle) { b.Dispatches.Entries[0].Entry[20] ^= 1 }, "dispatches entry"},
		{"flip a proof hash", func(b *verify.RunBundle) { b.Orch.Entries[0].InclusionProof[0][0] ^= 1 }, "orch inclusion"},
		{"flip the checkpoint signature", func(b *verify.RunBundle) {
			b.Dispatches.Checkpoint[len(b.Dispatches.Checkpoint)-5] ^= 1
		}, "dispatches checkpoint"},
		{"drop an orch entry", func(b *verify.RunBundle) {
			b.Orch.Entries = append(b.Orch.Entries[:2], b.Orch.Entries[3:]...)
			b.Orch.Selection.Count--
		}, "run entries"},
		{"drop the seal", func(b *verify.RunBundle) {
			n := len(b.Orch.Entries)
			b.Orch.Entries = b.Orch.Entries[:n-1]
			b.Orch.Selection.Count--
		}, "run"},
		{"duplicate an entry", func(b *verify.RunBundle) {
			b.Orch.Entries = append(b.Orch.Entries, b.Orch.Entries[len(b.Orch.Entries)-1])
			b.Orch.Selection.Count++
		}, "orch entries"},
		{"reorder entries", func(b *verify.RunBundle) {
			b.Orch.Entries[0], b.Orch.Entries[1] = b.Orch.Entries[1], b.Orch.Entries[0]
		}, "orch entries"},
		{"drop a dispatch's entries", func(b *verify.RunBundle) {
			var keep []verify.Entry
			var drop string
			for _, x := range b.Dispatches.Entries {
				f, _ := verify.DecodeEntry(x.Entry)
				if drop == "" {
					drop = f.Subject
				}
				if f.Subject != drop {
					keep = append(keep, x)
				}
			}
			b.Dispatches.Entries = keep
			b.Dispatches.Selection.Count = len(keep)
		}, "run dispatches"},
		{"drop a manifest", func(b *verify.RunBundle) { b.Dispatches.Manifests = b.Dispatches.Manifests[1:] }, "dispatches manifest"},
		{"edit a manifest's product", func(b *verify.RunBundle) {
			m := b.Dispatches.Manifests[0].Manifest
			i := bytes.Index(m, []byte(`"products"`))
			b.Dispatches.Manifests[0].Manifest = append(append([]byte{}, m[:i+20]...), append([]byte("0"), m[i+21:]...)...)
		}, "manifest binding"},
		{"rename the run", func(b *verify.RunBundle) { b.Run.Name = "other" }, "run"},
		{"another key", func(b *verify.RunBundle) {}, "orch key"},
	}
	for _, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			b := load()
			tc.mutate(b)
			o := opts
			if tc.name == "another key" {
				o.Key = "agora/0000000000000000+00000000+AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
			}
			rep := verify.VerifyRun(b, o)
			if rep.OK || rep.Tier != verify.TierNone {
				t.Fatalf("tampered bundle verified (tier %s)", rep.Tier)
			}
			found := false
			for _, f := range rep.Failed() {
				if f.Check == tc.row {
					found = true
				}
			}
			if !found {
				t.Errorf("no failed %q row; failed: %+v", tc.row, rep.Failed())
			}
		})
	}
}

// exportTwoTaskRun runs a two-task plan named name (the second needs the first's patch) to
// its end and writes its bundle with `agora orch audit`, returning the bundle's path.
func exportTwoTaskRun(t *testing.T, e *env, name string) string {
	t.Helper()
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: `+name+`
tasks:
  - {id: first, subagent: worker, input: {n: 1}}
  - id: second
    subagent: worker
    needs: {up: {from: first, select: patch}}
`), 0o644))
	e.run("orch", "submit", planPath, "--wait")
	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", name, "--out", out)
	return out
}
