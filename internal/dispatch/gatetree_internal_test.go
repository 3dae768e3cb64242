package dispatch

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/verdict"
)

func TestParseRawDiff(t *testing.T) {
	const a, b, z = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "0000000000000000000000000000000000000000"
	raw := ":100644 100755 " + a + " " + a + " M\x00run_tests.py\x00" +
		":000000 120000 " + z + " " + b + " A\x00src/l\x00" +
		":100644 000000 " + a + " " + z + " D\x00tests/test_calc.py\x00" +
		":000000 160000 " + z + " " + b + " A\x00src/vendor\x00" +
		":100644 120000 " + a + " " + b + " T\x00a\xffb\x00"
	got, err := parseRawDiff([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := []verdict.Change{
		{Path: "run_tests.py", OldMode: verdict.ModeFile, NewMode: verdict.ModeExec},
		{Path: "src/l", NewMode: verdict.ModeSymlink, Target: b},
		{Path: "tests/test_calc.py", OldMode: verdict.ModeFile},
		{Path: "src/vendor", NewMode: verdict.ModeGitlink},
		{Path: "a\xffb", OldMode: verdict.ModeFile, NewMode: verdict.ModeSymlink, Target: b},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		":100644 100644 " + a + " " + a + " M\x00",          // no path
		":100644 100644 " + a + " " + a + " M",              // no NUL
		":100648 100644 " + a + " " + a + " M\x00p\x00",     // not octal
		":100644 100644 " + a + " M\x00p\x00",               // a field missing
		"100644 100644 " + a + " " + a + " M\x00p\x00",      // no colon
		":100644 100644 " + a + " " + a + " M x\x00p\x00",   // a field more
		":1006440000 100644 " + a + " " + a + " M\x00p\x00", // too long
	} {
		if _, err := parseRawDiff([]byte(bad)); err == nil {
			t.Errorf("parseRawDiff(%q) accepted it", bad)
		}
	}
}

// FuzzParseRawDiff: no input panics the reader of diff-index's records, and what it accepts
// names a path for each record.
func FuzzParseRawDiff(f *testing.F) {
	f.Add([]byte(":100644 100755 aa bb M\x00x\x00:000000 120000 00 cc A\x00l\x00"))
	f.Add([]byte(":000000 160000 00 dd A\x00sub\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cs, err := parseRawDiff(raw)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.Path == "" {
				t.Fatalf("a change without a path: %+v", c)
			}
			if c.Target != "" && c.NewMode != verdict.ModeSymlink {
				t.Fatalf("a target on a non-link: %+v", c)
			}
		}
	})
}

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
