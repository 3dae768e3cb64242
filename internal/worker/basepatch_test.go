package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// writeBasePatch stages patch as the input KEY's patch.diff and names it the base patch.
func (f *fixture) writeBasePatch(patch string) {
	f.t.Helper()
	dir := filepath.Join(f.root, wire.InputsDir, "patch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, wire.BasePatchFile), []byte(patch), 0o444); err != nil {
		f.t.Fatal(err)
	}
	f.man.BasePatch = "patch/" + wire.BasePatchFile
}

const redPatch = `diff --git a/calc.txt b/calc.txt
--- a/calc.txt
+++ b/calc.txt
@@ -1 +1 @@
-a + b
+a - b
`

// TestWorker_BasePatchAppliedAfterBaseline: the agent starts from the base patch (a fix's
// rejected work), and its patch, taken against the baseline, holds the base patch and its
// own change together.
func TestWorker_BasePatchAppliedAfterBaseline(t *testing.T) {
	f := newFixture(t, `grep -q 'a - b' calc.txt || exit 7; printf 'fixed\n' > FIXED`)
	initRepo(t, f.ws(), map[string]string{"calc.txt": "a + b\n"})
	fresh := cloneRepo(t, f.ws())
	f.writeBasePatch(redPatch)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q exit %d: %s", res.Status, res.Reason, res.ExitCode, res.Detail)
	}
	patch := checkPatch(t, f, res)
	if !strings.Contains(patch, "+a - b") || !strings.Contains(patch, "+fixed") {
		t.Errorf("the patch does not hold the base patch and the agent's change:\n%s", patch)
	}
	applyPatch(t, f, fresh)
	if got := readFile(t, filepath.Join(fresh, "calc.txt")); got != "a - b\n" {
		t.Errorf("calc.txt after applying the patch to the base: %q", got)
	}
}

// TestWorker_BasePatchOnEmptyWorkspace: with no repository the base patch is taken against
// the empty tree.
func TestWorker_BasePatchOnEmptyWorkspace(t *testing.T) {
	f := newFixture(t, `test -f new.txt || exit 7; printf 'more\n' >> new.txt`)
	f.writeBasePatch("diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+first\n")
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q exit %d: %s", res.Status, res.Reason, res.ExitCode, res.Detail)
	}
	if patch := checkPatch(t, f, res); !strings.Contains(patch, "+first\n+more") {
		t.Errorf("patch:\n%s", patch)
	}
}

// TestWorker_BasePatchThatDoesNotApply fails the run before the agent, saying so; a base
// patch that is not a regular file among the inputs (a symlink) is refused too.
func TestWorker_BasePatchThatDoesNotApply(t *testing.T) {
	f := newFixture(t, `touch ran`)
	initRepo(t, f.ws(), map[string]string{"calc.txt": "something else\n"})
	f.writeBasePatch(redPatch)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(res.Detail, "base patch patch/patch.diff does not apply") {
		t.Fatalf("got %q %q: %s", res.Status, res.Reason, res.Detail)
	}
	if exists(f.ws("ran")) {
		t.Error("the agent ran although its base patch did not apply")
	}

	g := newFixture(t, `touch ran`)
	dir := filepath.Join(g.root, wire.InputsDir, "patch")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(g.tmp, "elsewhere.diff"), []byte(redPatch), 0o644)
	if err := os.Symlink(filepath.Join(g.tmp, "elsewhere.diff"), filepath.Join(dir, wire.BasePatchFile)); err != nil {
		t.Fatal(err)
	}
	g.man.BasePatch = "patch/" + wire.BasePatchFile
	g.write()
	_, res = g.run()
	if res.Status != wire.StatusFailed || !strings.Contains(res.Detail, "not a regular file among the inputs") {
		t.Fatalf("a symlinked base patch: %q %q: %s", res.Status, res.Reason, res.Detail)
	}
}
