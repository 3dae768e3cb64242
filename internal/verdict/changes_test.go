package verdict

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustMatcher(t testing.TB, globs ...string) *Matcher {
	t.Helper()
	m, err := NewMatcher(globs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAdmit is the allow-list on every kind of change git can carry: adds, deletes, edits,
// modes, types, both sides of a rename, symbolic links and submodules, with case and bytes
// matched exactly.
func TestAdmit(t *testing.T) {
	changes := mustMatcher(t, "src/**", "docs/**")
	protect := mustMatcher(t, "src/secret/**")
	links := map[string]string{
		"src/up":       "..",               // a link of the base tree climbing to the root
		"src/tests":    "../tests",         // one pointing outside changes
		"src/ok":       "lib",              // one staying inside
		"src/loop":     "loop",             // itself
		"src/a":        "b",                // a chain
		"src/b":        "c",                //
		"src/c":        "../tests/x.py",    // ending outside
		"src/abs":      "/etc/passwd",      // absolute
		"docs/to-src":  "../src/calc.py",   // inside, across globs
		"src/deep/esc": "../../../outside", // climbs out
	}
	lookup := func(p string) (string, bool) { s, ok := links[p]; return s, ok }
	for _, c := range []struct {
		name string
		ch   Change
		want string // "" admitted; else a part of why
	}{
		{"edit inside", Change{Path: "src/calc.py", OldMode: ModeFile, NewMode: ModeFile}, ""},
		{"add inside", Change{Path: "src/new/deep/mod.py", NewMode: ModeFile}, ""},
		{"delete inside", Change{Path: "docs/a.md", OldMode: ModeFile}, ""},
		{"add at the root", Change{Path: "unittest/__main__.py", NewMode: ModeFile}, "outside changes"},
		{"testz at the root", Change{Path: "testz.py", NewMode: ModeFile}, "outside changes"},
		{"GNUmakefile", Change{Path: "GNUmakefile", NewMode: ModeFile}, "outside changes"},
		{"conftest", Change{Path: "conftest.py", NewMode: ModeFile}, "outside changes"},
		{"delete outside", Change{Path: "tests/test_calc.py", OldMode: ModeFile}, "outside changes"},
		{"mode change outside", Change{Path: "run_tests.py", OldMode: ModeFile, NewMode: ModeExec}, "outside changes"},
		{"mode change inside", Change{Path: "src/calc.py", OldMode: ModeFile, NewMode: ModeExec}, ""},
		{"rename from outside (its old side)", Change{Path: "tests/test_calc.py", OldMode: ModeFile}, "outside changes"},
		{"rename into (its new side)", Change{Path: "src/test_calc.py", NewMode: ModeFile}, ""},
		{"case differs", Change{Path: "Src/calc.py", NewMode: ModeFile}, "outside changes"},
		{"the directory itself", Change{Path: "src", NewMode: ModeFile}, ""},
		{"a prefix of the directory", Change{Path: "srcx/a.py", NewMode: ModeFile}, "outside changes"},
		{"non-UTF-8 inside", Change{Path: "src/\xff.py", NewMode: ModeFile}, ""},
		{"non-UTF-8 outside", Change{Path: "\xff/x.py", NewMode: ModeFile}, "outside changes"},
		{"look-alike directory", Change{Path: "sr\u0441/calc.py", NewMode: ModeFile}, "outside changes"},
		{"gitlink added inside", Change{Path: "src/vendor", NewMode: ModeGitlink}, "submodule"},
		{"gitlink bumped inside", Change{Path: "src/vendor", OldMode: ModeGitlink, NewMode: ModeGitlink}, "submodule"},
		{"gitlink removed inside", Change{Path: "src/vendor", OldMode: ModeGitlink}, ""},
		{"gitlink outside", Change{Path: "vendor", NewMode: ModeGitlink}, "outside changes"},
		{"link inside to inside", Change{Path: "src/l", NewMode: ModeSymlink, Target: "calc.py"}, ""},
		{"link to a sibling directory inside", Change{Path: "src/l", NewMode: ModeSymlink, Target: "ok/x.py"}, ""},
		{"link to the tests", Change{Path: "src/l", NewMode: ModeSymlink, Target: "../tests/test_calc.py"}, `"tests/test_calc.py", outside changes`},
		{"link to a protected path", Change{Path: "src/l", NewMode: ModeSymlink, Target: "secret/key"}, "protected"},
		{"link out of the tree", Change{Path: "src/l", NewMode: ModeSymlink, Target: "../../etc/passwd"}, "leaves the tree"},
		{"absolute link", Change{Path: "src/l", NewMode: ModeSymlink, Target: "/etc/passwd"}, "absolute"},
		{"link through a base link up", Change{Path: "src/l", NewMode: ModeSymlink, Target: "up/tests/x.py"}, `"tests/x.py", outside changes`},
		{"link through a base link out", Change{Path: "src/l", NewMode: ModeSymlink, Target: "tests/x.py"}, `"tests/x.py", outside changes`},
		{"link whose dotdot follows a link", Change{Path: "src/l", NewMode: ModeSymlink, Target: "tests/../src/calc.py"}, ""},
		// Lexically src/x, inside; but src/up is the root, and ".." climbs from there.
		{"link whose dotdot climbs from where a link led", Change{Path: "src/l", NewMode: ModeSymlink, Target: "up/../x"}, "leaves the tree"},
		{"link whose dotdot lands outside", Change{Path: "src/l", NewMode: ModeSymlink, Target: "tests/../tests/x.py"}, `"tests/x.py", outside changes`},
		{"link chain ending outside", Change{Path: "src/l", NewMode: ModeSymlink, Target: "a"}, `"tests/x.py", outside changes`},
		{"link to a loop", Change{Path: "src/l", NewMode: ModeSymlink, Target: "loop"}, "more than 40"},
		{"link to an absolute link", Change{Path: "src/l", NewMode: ModeSymlink, Target: "abs"}, "absolute"},
		{"link to a link leaving the tree", Change{Path: "src/l", NewMode: ModeSymlink, Target: "deep/esc"}, "leaves the tree"},
		{"link across globs", Change{Path: "docs/l", NewMode: ModeSymlink, Target: "to-src"}, ""},
		{"link to the root", Change{Path: "src/l", NewMode: ModeSymlink, Target: ".."}, `".", outside changes`},
		{"link to its own directory", Change{Path: "src/l", NewMode: ModeSymlink, Target: "."}, ""},
		{"empty link", Change{Path: "src/l", NewMode: ModeSymlink, Target: ""}, "empty"},
		{"file turned link", Change{Path: "src/calc.py", OldMode: ModeFile, NewMode: ModeSymlink, Target: "../tests/test_calc.py"}, "outside changes"},
		{"link turned file", Change{Path: "src/l", OldMode: ModeSymlink, NewMode: ModeFile}, ""},
		{"link deleted", Change{Path: "src/tests", OldMode: ModeSymlink}, ""},
		{"link outside pointing inside", Change{Path: "tests/l", NewMode: ModeSymlink, Target: "../src/calc.py"}, "outside changes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Admit(changes, protect, []Change{c.ch}, lookup)
			switch {
			case c.want == "" && len(got) > 0:
				t.Fatalf("refused %+v: %s", c.ch, got[0].Why)
			case c.want != "" && len(got) == 0:
				t.Fatalf("admitted %+v, want refused (%s)", c.ch, c.want)
			case c.want != "" && !strings.Contains(got[0].Why, c.want):
				t.Fatalf("refused %+v as %q, want %q in it", c.ch, got[0].Why, c.want)
			case c.want != "" && got[0].Path != c.ch.Path:
				t.Fatalf("refusal names %q, want %q", got[0].Path, c.ch.Path)
			}
		})
	}
}

// TestAdmit_OrderAndVerdict: the offences keep git's order, the verdict names the first one
// first, caps the list and its detail, and round-trips through Parse with its digest.
func TestAdmit_OrderAndVerdict(t *testing.T) {
	changes := mustMatcher(t, "src/**")
	var changed []Change
	for _, p := range []string{"GNUmakefile", "src/a.py", "testz.py", "unittest/__main__.py"} {
		changed = append(changed, Change{Path: p, NewMode: ModeFile})
	}
	for i := range 100 {
		changed = append(changed, Change{Path: "z/" + strings.Repeat("x", 40) + string(rune('a'+i%26)) + "/" + string(rune('0'+i%10)), NewMode: ModeFile})
	}
	changed = append(changed, Change{Path: "\xfe.py", NewMode: ModeFile})
	off := Admit(changes, nil, changed, nil)
	if len(off) != 104 || off[0].Path != "GNUmakefile" || off[1].Path != "testz.py" || off[2].Path != "unittest/__main__.py" {
		t.Fatalf("offences %v", off[:3])
	}
	v := OutsideChanges([]string{"make", "test"}, []string{"src/**"}, off)
	if v.Passed || v.Reason != ReasonOutside || v.Exit != -1 || len(v.OutsidePaths) != MaxProtectedPaths || v.OutsidePaths[0] != "GNUmakefile" {
		t.Fatalf("verdict %+v", v)
	}
	if !strings.HasPrefix(v.Detail, `the patch touches 104 path(s) the gate does not admit (changes: src/**): "GNUmakefile" (outside changes)`) ||
		!strings.HasSuffix(v.Detail, "; the command did not run") || len(v.Detail) > maxDetail {
		t.Errorf("detail %q", v.Detail)
	}
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest() != v.Digest() || !strings.Contains(string(b), `"outside_paths":["GNUmakefile","testz.py"`) {
		t.Errorf("round trip: %s", b)
	}
	// A non-UTF-8 path is named Go-quoted: records and the audit hold valid UTF-8.
	w := OutsideChanges([]string{"true"}, []string{"src/**"}, []Offence{{Path: "\xfe.py", Why: "outside changes"}})
	if w.OutsidePaths[0] != `"\xfe.py"` {
		t.Errorf("non-UTF-8 path shown as %q", w.OutsidePaths[0])
	}
	_ = w.Digest() // must not panic
	if _, ok := v.Details()["outside_paths"]; !ok {
		t.Error("the audit form lacks outside_paths")
	}
}

// TestVerdict_OldFormsUnchanged: a spec and a verdict that use neither changes nor expect
// have the bytes and digests they had before those existed.
func TestVerdict_OldFormsUnchanged(t *testing.T) {
	s := Spec{Command: []string{"go", "test"}, Protect: []string{"a"}}
	b, _ := json.Marshal(s)
	if string(b) != `{"command":["go","test"],"protect":["a"]}` {
		t.Errorf("spec JSON %s", b)
	}
	if d := s.Details(); len(d) != 3 {
		t.Errorf("spec details %v", d)
	}
	v := Green([]string{"true"}, 1500*time.Millisecond, TailText{Text: "ok\n", Total: 3})
	// The audit form (so the digest) has exactly the keys it had before.
	var keys []string
	for k := range v.Details() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got := strings.Join(keys, ","); got != "command,duration_ms,exit,output_bytes,output_sha256,passed" {
		t.Errorf("green verdict's audit keys: %s", got)
	}
	vb, _ := json.Marshal(v)
	for _, k := range []string{"outside_paths", "evidence"} {
		if strings.Contains(string(vb), k) {
			t.Errorf("a verdict without them writes %s: %s", k, vb)
		}
		if _, ok := v.Details()[k]; ok {
			t.Errorf("a verdict without them has %s in its audit form", k)
		}
	}
}

func TestSpec_ChangesExpectRoundTrip(t *testing.T) {
	s := Spec{Command: []string{"python3", "run_tests.py"}, Changes: []string{"src/**", "docs/**"},
		Protect: []string{"src/fixtures/**"}, Expect: &Expect{JUnit: "junit.xml", MinTests: 3}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"command":["python3","run_tests.py"],"protect":["src/fixtures/**"],"changes":["src/**","docs/**"],"expect":{"junit":"junit.xml","min_tests":3}}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	back, err := ParseSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	d := s.Details()
	if diff := cmp.Diff(map[string]any{"junit": "junit.xml", "min_tests": int64(3)}, d["expect"]); diff != "" {
		t.Errorf("details expect: %s", diff)
	}
	c := s.Clone()
	c.Changes[0], c.Expect.MinTests = "x", 9
	if s.Changes[0] != "src/**" || s.Expect.MinTests != 3 {
		t.Error("Clone shares with the original")
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"command":["true"],"changes":["/abs"]}`, "changes[0]"},
		{`{"command":["true"],"changes":["a","a"]}`, "twice"},
		{`{"command":["true"],"changes":[]}`, "changes is empty"},
		{`{"command":["true"],"expect":{"junit":"a/x.xml"}}`, "file name"},
		{`{"command":["true"],"expect":{"junit":"../x.xml"}}`, "starts with"},
		{`{"command":["true"],"expect":{"junit":".hidden"}}`, "starts with"},
		{`{"command":["true"],"expect":{"junit":""}}`, "empty"},
		{`{"command":["true"],"expect":{"junit":"a.xml","min_tests":-1}}`, "min_tests"},
		{`{"command":["true"],"expect":{"junit":"a.xml","tests":1}}`, "tests"},
	} {
		if _, err := ParseSpec([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSpec(%s) = %v, want an error with %q", bad.doc, err, bad.want)
		}
	}
	many := make([]string, MaxChanges+1)
	for i := range many {
		many[i] = "d" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "/**"
	}
	if err := (Spec{Command: []string{"true"}, Changes: many}).Validate(); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 changes globs: %v", err)
	}
}
