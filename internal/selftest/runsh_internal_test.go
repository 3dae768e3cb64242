package selftest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRunSh_MissingToolWording: an attack whose tool the sandbox lacks is not run, and its
// row says which tool and where it would come from: the target's image on docker and
// kubernetes, this host on bubblewrap. Both ways an attack needs a tool are covered: attempt
// of a program not on PATH, and an entry's own check with missing.
func TestRunSh_MissingToolWording(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("SKIP: no sh: the test runs the bundle's run.sh")
	}
	runSh, err := bundleFS.ReadFile("bundle/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	const tool = "agora-selftest-no-such-tool"
	attacks := map[string]string{
		"by-attempt": "attempt " + tool + " --version\n",
		"by-check":   "command -v " + tool + " >/dev/null || { missing " + tool + "; exit 0; }\nreport done ran\n",
	}
	caps := t.TempDir()
	if err := os.MkdirAll(filepath.Join(caps, "selftest", "attacks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(caps, "selftest", "run.sh"), runSh, 0o644); err != nil {
		t.Fatal(err)
	}
	for id, prog := range attacks {
		if err := os.WriteFile(filepath.Join(caps, "selftest", "attacks", id+".sh"), []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"local":      tool + " is not installed in the sandbox: it is missing on this host",
		"docker":     tool + " is not installed in the sandbox: it is missing in the target's image",
		"kubernetes": tool + " is not installed in the sandbox: it is missing in the target's image",
	}
	r := &run{secret: "s3cret"}
	for provider, evidence := range want {
		for id := range attacks {
			out := t.TempDir()
			cmd := exec.Command(sh, filepath.Join(caps, "selftest", "run.sh"))
			cmd.Env = []string{"PATH=/usr/bin:/bin", "AGORA_CAPABILITIES=" + caps, "AGORA_OUT=" + out,
				`AGORA_INPUT_JSON={"attack":"` + id + `","nonce":"n1","provider":"` + provider + `"}`}
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s on %s: run.sh: %v\n%s", id, provider, err, b)
			}
			var s seen
			s.canary, _ = os.ReadFile(filepath.Join(out, "outputs", "canary"))
			s.report, _ = os.ReadFile(filepath.Join(out, "outputs", "report"))
			got, ev := r.decide(Attack{ID: id, Expect: Blocked, Observe: ObserveReport}, "n1", s)
			if got != NotRun || ev != evidence {
				t.Errorf("%s on %s: seen %s, evidence %q; want %s, %q", id, provider, got, ev, NotRun, evidence)
			}
		}
	}
}
