package selftest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/selftest"
	"github.com/agora-dev/agora/internal/version"
)

// weakenTag builds the agora whose controls are weakened on purpose, each by a constant that
// is true only under the tag (weaken_on.go beside it): a verify gate that skips its protected
// paths (internal/dispatch), an agora verify that skips the inclusion check
// (internal/audit/verify), a model gateway that lets a request name any model
// (internal/modelgw) and a worker that vouches for the final.md the agent left instead of the
// model's answer (internal/worker). No agora.yaml takes these controls away, so the knob is a
// build tag: a build without it drops the branches, and no flag or variable turns them on.
const weakenTag = "agora_weaken"

// weakenedWords are what the weakened programs say when they skip a check, by program: only a
// build with the tag holds them.
var weakenedWords = map[string]string{
	"agora-full":   "not checked: built with -tags agora_weaken",
	"agora-worker": "built with -tags agora_weaken: vouching for the",
}

// weakened are the attacks the weakened agora must see allowed, each with the control the tag
// takes away: were one to stop running its attack, its row would be not run, and the test
// fails.
var weakened = map[string]string{
	"verdict-protected-test":   "protected paths",
	"verdict-gate-script":      "protected paths",
	"verdict-protected-delete": "protected paths",
	"audit-edit-entry":         "the inclusion check",
	"gw-model-other":           "the model pin",
	"gw-model-case":            "the model pin",
	"verdict-review-forged":    "the worker's own answer",
}

// TestSelftest_ControlWeakenedByBuildTag is the control test of the verdicts, audit and
// gateway controls no configuration takes away (docs/selftest.md, "Control tests"): an agora
// built with -tags agora_weaken sees the attacks its weakened controls stop as allowed, and
// the agora under test sees them blocked. Building that agora costs a compile of the four
// packages and what imports them, and a link of the programs.
func TestSelftest_ControlWeakenedByBuildTag(t *testing.T) {
	needTools(t)
	var ids []string
	for id := range weakened {
		ids = append(ids, id)
	}
	run := "^(" + joinQuoted(ids) + ")$"
	weak, cleanup, err := agoratest.BuildBinaryFlags("-tags=" + weakenTag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	// The weakened programs' words are in the weakened build alone: the compiler drops the
	// branches from a build without the tag.
	for bin, want := range map[string]bool{weak: true, agoraBin(t): false} {
		for prog, words := range weakenedWords {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), prog))
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(b, []byte(words)); got != want {
				t.Errorf("%s beside %s holds %q: %v, want %v", prog, bin, words, got, want)
			}
		}
	}
	// Its module version and commit are a real build's: agora version names the tag.
	for bin, want := range map[string]bool{weak: true, agoraBin(t): false} {
		out := agora(t, bin, t.TempDir(), "version")
		if got := bytes.Contains(out, []byte(version.WeakenedWords)); got != want {
			t.Errorf("agora version of %s says it is weakened: %v, want %v:\n%s", bin, got, want, out)
		}
	}
	for _, c := range []struct {
		name string
		bin  string
		want string
	}{
		{"weakened", weak, selftest.Allowed},
		{"as built", agoraBin(t), selftest.Blocked},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, stderr := selftestWith(t, c.bin, "--target", "local", "--run", run)
			if got := strings.Contains(stderr, version.WeakenedWords); got != (c.bin == weak) {
				t.Errorf("agora selftest's standard error says the agora is weakened: %v:\n%s", got, stderr)
			}
			if len(rep.Rows) != len(weakened) {
				t.Fatalf("%d rows, want %d: %+v", len(rep.Rows), len(weakened), rep.Rows)
			}
			for _, r := range rep.Rows {
				if r.Seen != c.want {
					t.Errorf("%s (%s): seen %s, want %s: %s", r.ID, weakened[r.ID], r.Seen, c.want, r.Evidence)
				}
			}
		})
	}
}

// selftestWith runs `agora selftest ARGS -o json` with the agora program bin in a fresh home
// and returns its one report and its standard error; its exit code is the rows' to tell.
func selftestWith(t *testing.T, bin string, args ...string) (selftest.Report, string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	agora(t, bin, home, "init")
	cmd := exec.CommandContext(t.Context(), bin, append(append([]string{"selftest"}, args...), "-o", "json")...)
	cmd.Env = append(os.Environ(), "AGORA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.Reports) != 1 {
		t.Fatalf("agora selftest: want one report as JSON: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	return res.Reports[0], stderr.String()
}

func joinQuoted(ids []string) string {
	var b bytes.Buffer
	for i, id := range ids {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(id) // ids are lower-case words and -, nothing a regexp reads specially
	}
	return b.String()
}
