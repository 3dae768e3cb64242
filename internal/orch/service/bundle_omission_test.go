package service_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestRunBundle_HiddenEnd, through the real export path: a run
// bundle written by `agora orch audit`, from which one dispatch's terminal entry and its
// manifest are deleted (selection.count lowered to match), hides that task's products while
// orch.db says it succeeded. It verified before, printing "every one of the run's 2 attempts
// has its dispatch entries". Now `agora verify` exits 5: the signed selection no longer
// matches, and even when the selection is re-signed with the log's own key (by whoever holds
// keys/audit.key) the run check names the attempt that lost its end. On the way it checks
// that --out replaces a link planted there with a 0600 file instead of writing through it.
func TestRunBundle_HiddenEnd(t *testing.T) {
	e := servedEnv(t)
	out := exportTwoTaskRun(t, e, "omission")
	pub := filepath.Join(e.home, "keys", "audit.pub")
	if code, stdout := verifyFile(t, out, pub); code != 0 {
		t.Fatalf("untouched bundle: exit %d\n%s", code, stdout)
	}
	// --out never writes through a link planted there: the link is replaced by a 0600 file.
	victim := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(victim, []byte("original"), 0o600))
	link := filepath.Join(t.TempDir(), "link.json")
	must(t, os.Symlink(victim, link))
	e.run("orch", "audit", "omission", "--out", link)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "original" {
		t.Errorf("orch audit --out wrote through a link: victim now %q (%v)", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("orch audit --out: %v (%v), want a regular 0600 file", fi.Mode(), err)
	}

	raw, err := os.ReadFile(out)
	must(t, err)
	skey, err := os.ReadFile(filepath.Join(e.home, "keys", "audit.key"))
	must(t, err)
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	must(t, err)

	tests := []struct {
		name   string
		resign bool
		want   []string // failed rows, "check item"
	}{
		{"terminal entry and manifest deleted", false, []string{"dispatches selection", "run dispatches "}},
		{"and the selection re-signed by the key holder", true, []string{"run dispatches "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := verify.ParseRunBundle(bytes.NewReader(raw))
			must(t, err)
			victim := hideEnd(t, b, "second")
			if tt.resign {
				must(t, verify.SignSelection(b.Dispatches, signer))
			}
			path := filepath.Join(t.TempDir(), "tampered.json")
			var buf bytes.Buffer
			must(t, verify.WriteRunBundle(&buf, b))
			must(t, os.WriteFile(path, buf.Bytes(), 0o600))
			code, stdout := verifyFile(t, path, pub)
			if code != 5 {
				t.Errorf("agora verify exit %d, want 5\n%s", code, stdout)
			}
			var failedRows []string
			for _, line := range strings.Split(stdout, "\n") {
				if f := strings.Split(line, "\t"); len(f) == 3 && f[1] == "FAIL" {
					failedRows = append(failedRows, f[0])
				}
			}
			want := append([]string{}, tt.want...)
			want[len(want)-1] += victim
			if strings.Join(failedRows, ",") != strings.Join(want, ",") {
				t.Errorf("failed rows %q, want %q\n%s", failedRows, want, stdout)
			}
			if strings.Contains(stdout, "has its dispatch entries") {
				t.Errorf("verify still says every attempt has its dispatch entries:\n%s", stdout)
			}
		})
	}
}

// hideEnd deletes the terminal entry of task's dispatch and the manifest it names from b, and
// lowers the dispatches part's count to match. It returns the dispatch id.
func hideEnd(t *testing.T, b *verify.RunBundle, task string) string {
	t.Helper()
	var victim string
	for _, x := range b.Orch.Entries {
		f, err := verify.DecodeEntry(x.Entry)
		must(t, err)
		if f.Kind == "orch.task.succeeded" && strings.HasSuffix(f.Subject, "/task/"+task) {
			victim, _ = f.Details["dispatch_id"].(string)
		}
	}
	var ref string
	var kept []verify.Entry
	for _, x := range b.Dispatches.Entries {
		f, err := verify.DecodeEntry(x.Entry)
		must(t, err)
		if f.Subject == "dispatch/"+victim && f.Kind == "dispatch.finished" {
			ref, _ = f.Details["manifest"].(string)
			continue
		}
		kept = append(kept, x)
	}
	if victim == "" || ref == "" {
		t.Fatalf("no finished dispatch of task %s in the bundle", task)
	}
	b.Dispatches.Entries, b.Dispatches.Selection.Count = kept, len(kept)
	var manifests []verify.Manifest
	for _, m := range b.Dispatches.Manifests {
		if sum := sha256.Sum256(m.Manifest); "sha256:"+hex.EncodeToString(sum[:]) != ref {
			manifests = append(manifests, m)
		}
	}
	b.Dispatches.Manifests = manifests
	return victim
}

// verifyFile runs the real `agora verify` with no AGORA_HOME and returns its exit code and
// standard output.
func verifyFile(t *testing.T, bundle, pub string) (int, string) {
	t.Helper()
	cmd := exec.Command(agoraBin, "verify", bundle, "--key", pub)
	cmd.Env = append(os.Environ(), "AGORA_HOME=/nonexistent")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String()
	}
	t.Fatalf("agora verify: %v", err)
	return 0, ""
}
