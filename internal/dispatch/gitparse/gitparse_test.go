package gitparse

import (
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
	got, err := RawDiff([]byte(raw))
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
		if _, err := RawDiff([]byte(bad)); err == nil {
			t.Errorf("RawDiff(%q) accepted it", bad)
		}
	}
}

// FuzzParseRawDiff: no input panics the reader of diff-index's records, and what it accepts
// names a path for each record.
func FuzzParseRawDiff(f *testing.F) {
	f.Add([]byte(":100644 100755 aa bb M\x00x\x00:000000 120000 00 cc A\x00l\x00"))
	f.Add([]byte(":000000 160000 00 dd A\x00sub\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cs, err := RawDiff(raw)
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

// FuzzCommitterDate: a commit object's committer date is read without a panic, and what is
// returned is git's "SECONDS +ZONE", nothing of the rest of the line.
func FuzzCommitterDate(f *testing.F) {
	for _, s := range []string{
		"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a@a> 1 +0000\ncommitter a <a@a> 1700000000 -0700\n\nmsg\n",
		"committer >\n",
		"committer a <a> x y\n",
		"\ncommitter a <a@a> 1 +0000\n",
		"committer no angle 1 +0000\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := CommitterDate(body)
		if err != nil {
			return
		}
		f := strings.Fields(d)
		if len(f) != 2 || f[0] == "" || strings.Trim(f[0], "0123456789") != "" || !validZone(f[1]) || strings.ContainsAny(d, "\n<>") {
			t.Errorf("CommitterDate = %q", d)
		}
	})
}
