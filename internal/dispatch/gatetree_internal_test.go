package dispatch

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/verdict"
)

// TestGateTree_CraftedPatches: patches no worker's capture writes but a forged patch could
// carry are judged by what git applies: a path outside the tree or in .git does not apply; a
// submodule, a link to outside changes, a binary file and a mode change are touched paths the
// changes check judges, read from the patched index.
func TestGateTree_CraftedPatches(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed")
	}
	const sub = "1234567890123456789012345678901234567890"
	for _, c := range []struct {
		name, patch string
		applyErr    bool
		want        []string // the offences' paths under changes src/**
		why         string
	}{
		{"a path climbing out", "diff --git a/src/../x b/src/../x\nnew file mode 100644\n--- /dev/null\n+++ b/src/../x\n@@ -0,0 +1 @@\n+x\n", true, nil, ""},
		{"a path in .git", "diff --git a/src/.git/hooks/pre b/src/.git/hooks/pre\nnew file mode 100755\n--- /dev/null\n+++ b/src/.git/hooks/pre\n@@ -0,0 +1 @@\n+x\n", true, nil, ""},
		{"an absolute path", "diff --git a//etc/x b//etc/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1 @@\n+x\n", true, nil, ""},
		{"a submodule inside", "diff --git a/src/vendor b/src/vendor\nnew file mode 160000\nindex 0000000.." + sub + "\n--- /dev/null\n+++ b/src/vendor\n@@ -0,0 +1 @@\n+Subproject commit " + sub + "\n", false, []string{"src/vendor"}, "submodule"},
		{"a link out of changes", "diff --git a/src/l b/src/l\nnew file mode 120000\n--- /dev/null\n+++ b/src/l\n@@ -0,0 +1 @@\n+../tests/x.py\n\\ No newline at end of file\n", false, []string{"src/l"}, `"tests/x.py", outside changes`},
		{"a link inside", "diff --git a/src/l b/src/l\nnew file mode 120000\n--- /dev/null\n+++ b/src/l\n@@ -0,0 +1 @@\n+a.py\n\\ No newline at end of file\n", false, nil, ""},
		{"a link through a link it adds", "diff --git a/src/up b/src/up\nnew file mode 120000\n--- /dev/null\n+++ b/src/up\n@@ -0,0 +1 @@\n+..\n\\ No newline at end of file\n" +
			"diff --git a/src/l b/src/l\nnew file mode 120000\n--- /dev/null\n+++ b/src/l\n@@ -0,0 +1 @@\n+up/conftest.py\n\\ No newline at end of file\n", false, []string{"src/l", "src/up"}, `"conftest.py", outside changes`},
		{"a binary file outside", "diff --git a/data.bin b/data.bin\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..f76dd238ade08917e6712764a16a22005a50573d\nGIT binary patch\nliteral 1\nIcmZPo000310RR91\n\nliteral 0\nHcmV?d00001\n\n", false, []string{"data.bin"}, "outside changes"},
		{"an executable outside", "diff --git a/run.sh b/run.sh\nnew file mode 100755\n--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+exit 0\n", false, []string{"run.sh"}, "outside changes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st := &stage{dir: dir, workspace: filepath.Join(dir, "workspace")}
			tree, err := buildGateTree(t.Context(), &Record{ID: "01CRAFT"}, st, []byte(c.patch), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.applyErr {
				if tree.applyErr == "" {
					t.Fatalf("the patch applied: touched %q", tree.touched)
				}
				return
			}
			if tree.applyErr != "" {
				t.Fatalf("the patch does not apply: %s", tree.applyErr)
			}
			off, err := admit(t.Context(), verdict.Spec{Command: []string{"true"}, Changes: []string{"src/**"}}, tree)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range off {
				got = append(got, o.Path)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("offences %v, want %q", off, c.want)
			}
			if len(off) > 0 && !strings.Contains(off[0].Why, c.why) {
				t.Errorf("why %q, want %q in it", off[0].Why, c.why)
			}
		})
	}
}
