package verdict

import (
	"strings"
	"testing"
)

// TestRedTeam44G_GlobEdges: the changes globs as an agent writing a patch would probe them:
// braces, classes, escapes, "**" in every place, dot files and .git, look-alike prefixes and
// bytes that are not UTF-8. Each row is what a path the patch could touch gets.
func TestRedTeam44G_GlobEdges(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		// Braces expand before segments: an alternative may hold a '/'.
		{"src/{a,b}/**", "src/a/x.py", true},
		{"src/{a,b}/**", "src/b", true},
		{"src/{a,b}/**", "src/c/x.py", false},
		{"src/{a,b}/**", "src/ab/x.py", false},
		{"{src/a,docs}/**", "src/a/x", true},
		{"{src/a,docs}/**", "src/x", false},
		// A comma outside braces is a character, not a separator.
		{"src/*,tests/*", "tests/x", false},
		{"src/*,tests/*", "src/a,tests/b", true},
		// Classes and escapes stay within one character of one segment.
		{"src/[!.]*", "src/.hidden", false},
		{"src/[!.]*", "src/visible", true},
		{`src/\*`, "src/*", true},
		{`src/\*`, "src/x", false},
		{`src/\{a,b\}`, "src/{a,b}", true},
		{`src/\{a,b\}`, "src/a", false},
		{"src/[a-z]", "src/é", false},
		{"src/?", "src/é", true},    // one character, two bytes
		{"src/?", "src/\xff", true}, // one byte that is not UTF-8
		{"src/??", "src/é", false},
		// "*" and "?" never cross a '/'.
		{"src/*", "src/a/b", false},
		{"src/?", "src//", false},
		{"src*", "src/x", false},
		// "**" spans segments only as a whole segment, and matches none of them too.
		{"src/**", "src", true},
		{"src/**", "srcx/a", false},
		{"src/**", "x/src/a", false},
		{"**/src/**", "x/src/a", true},
		{"src/**/gen", "src/gen", true},
		{"src/**/gen", "src/a/b/gen/x", false},
		// A leading dot is matched by * (documented): "*" admits .gitattributes, .git look-alikes.
		{"*", ".gitattributes", true},
		{"src/*", "src/.git", true},
		{"src/**", "src/.gitmodules", true},
		// Byte for byte: case, NFC against NFD, a Cyrillic look-alike, a trailing space.
		{"tests/**", "Tests/x.py", false},
		{"tests/t\u00e9st.py", "tests/te\u0301st.py", false},
		{"src/**", "sr\u0441/x", false},
		{"src/**", "src /x", false},
		// Names with bytes a shell or a parser might trip over are just bytes.
		{"src/**", "src/a\nb", true},
		{"src/**", "src/a\tb\"c'd", true},
		{"src/*", "src/\xfe\xff", true},
		{"src/**", strings.Repeat("x/", 2000) + "y", false},
		{"src/**", "src/" + strings.Repeat("x/", 2000) + "y", true},
	} {
		got, err := Match(c.glob, c.path)
		if err != nil {
			t.Errorf("Match(%q): %v", c.glob, err)
			continue
		}
		if got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	// Globs that would read as something they are not are refused, not guessed at.
	for _, g := range []string{"src/**,docs/**", "{src,..}/**", "{,src}/**", "src/{a,}", "./src/**", "src/./x", "src//x",
		"src/", "/src/**", "src/**/", "src/[/]x", `src\`, "{**,x}y", "a**"} {
		if err := CheckPattern(g); err == nil {
			t.Errorf("CheckPattern(%q) accepted it", g)
		}
	}
}

// TestRedTeam44G_AdmitEdges: the changes check on what an agent would try: a link whose
// target walks through files and dot segments, chains at the kernel's limit, targets at and
// past PATH_MAX, and a link to a directory a changes glob names as a path.
func TestRedTeam44G_AdmitEdges(t *testing.T) {
	changes := mustMatcher(t, "src/**", "docs/**")
	protect := mustMatcher(t, "src/keep.py")
	links := map[string]string{"src/up": "..", "src/tests": "../tests"}
	// A chain of exactly MaxLinkHops links inside src, and one a link longer.
	for i := range MaxLinkHops + 1 {
		links["src/c"+itoa(i)] = "c" + itoa(i+1)
	}
	lookup := func(p string) (string, bool) { s, ok := links[p]; return s, ok }
	for _, c := range []struct {
		name, path, target string
		want               string // "" admitted, else a part of why
	}{
		{"dot segments inside", "src/l", "./a/./b/../c", ""},
		{"a trailing slash", "src/l", "a/", ""},
		{"repeated slashes", "src/l", "a//b", ""},
		{"through a file's name (the kernel: not a directory)", "src/l", "calc.py/../../tests/x", `"tests/x", outside changes`},
		{"out and back in", "src/l", "../docs/../src/a", ""},
		{"out and back in through a link", "src/l", "tests/../src/a", ""},
		{"up through a link and out", "src/l", "up/tests/x", `"tests/x", outside changes`},
		{"to the root through a link", "src/l", "up", `".", outside changes`},
		{"to .git", "src/l", "../.git/config", `".git/config", outside changes`},
		{"to a protected file by another spelling", "src/l", "./sub/../keep.py", "protected"},
		{"to a protected file through a link", "src/l", "up/src/keep.py", "protected"},
		{"a newline in the target", "src/l", "a\nb", ""},
		{"a NUL in the target", "src/l", "a\x00b", "NUL"},
		{"a chain of the kernel's length", "src/c" + itoa(MaxLinkHops), "c" + itoa(MaxLinkHops+1), ""},
		{"a chain one link too long", "src/l", "c0", "more than 40"},
		{"a target of PATH_MAX bytes", "src/l", strings.Repeat("a/", maxLinkTarget/2-1) + "ab", ""},
		{"a target past PATH_MAX", "src/l", strings.Repeat("a/", maxLinkTarget/2) + "a", "bytes; at most"},
		{"climbing out by one", "src/l", "../../x", "leaves the tree"},
		{"climbing out after a link", "src/l", "up/../x", "leaves the tree"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Admit(changes, protect, []Change{{Path: c.path, NewMode: ModeSymlink, Target: c.target}}, lookup)
			switch {
			case c.want == "" && len(got) > 0:
				t.Fatalf("refused %q -> %q: %s", c.path, c.target, got[0].Why)
			case c.want != "" && len(got) == 0:
				t.Fatalf("admitted %q -> %q, want refused (%s)", c.path, c.target, c.want)
			case c.want != "" && !strings.Contains(got[0].Why, c.want):
				t.Fatalf("refused %q -> %q as %q, want %q in it", c.path, c.target, got[0].Why, c.want)
			}
		})
	}
	// Without the links of the tree (the patch leaves none), a path is judged as it is named.
	if off := Admit(changes, nil, []Change{{Path: "src/tests/x.py", NewMode: ModeFile}}, nil); len(off) != 0 {
		t.Errorf("a regular file inside changes refused: %v", off)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// TestRedTeam44G_JUnitTricks: reports as the code under test (or a broken runner) could leave
// them. Nothing in text, comments, CDATA or a second document adds a test or hides a failure;
// what a runner writes legitimately (a BOM, namespaces, processing instructions) parses.
func TestRedTeam44G_JUnitTricks(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      Evidence // with err == ""
		err       string
	}{
		{"a UTF-8 byte order mark", "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"UTF-8\"?><testsuite><testcase/></testsuite>", Evidence{Tests: 1}, ""},
		{"a byte order mark twice", "\xef\xbb\xbf\xef\xbb\xbf<testsuite><testcase/></testsuite>", Evidence{}, "outside the root"},
		{"UTF-16 bytes", "\xff\xfe<\x00t\x00e\x00s\x00t\x00s\x00u\x00i\x00t\x00e\x00/\x00>\x00", Evidence{}, "well-formed"},
		{"UTF-16 declared", `<?xml version="1.0" encoding="UTF-16"?><testsuite><testcase/></testsuite>`, Evidence{}, "well-formed"},
		{"XML 1.1", `<?xml version="1.1"?><testsuite><testcase/></testsuite>`, Evidence{}, "well-formed"},
		{"cases in CDATA are text", `<testsuite><testcase><![CDATA[</testcase><testcase/><testcase/>]]></testcase></testsuite>`, Evidence{Tests: 1}, ""},
		{"cases in a comment are text", `<testsuite><testcase/><!-- <testcase/><testcase/> --></testsuite>`, Evidence{Tests: 1}, ""},
		{"escaped markup is text", `<testsuite><testcase>&lt;testcase/&gt;</testcase></testsuite>`, Evidence{Tests: 1}, ""},
		{"a failure in CDATA of a passing case is not a failure", `<testsuite><testcase><system-out><![CDATA[<failure/>]]></system-out></testcase></testsuite>`, Evidence{Tests: 1}, ""},
		{"a namespaced failure still fails", `<testsuite xmlns:x="urn:x"><testcase><x:failure/></testcase></testsuite>`, Evidence{Tests: 1, Failures: 1}, ""},
		{"a default namespace", `<testsuites xmlns="urn:junit"><testsuite><testcase/></testsuite></testsuites>`, Evidence{Tests: 1}, ""},
		{"a suite inside a suite inside suites", `<testsuites><testsuite><testsuites><testsuite><testcase/></testsuite></testsuites></testsuite></testsuites>`, Evidence{Tests: 1}, ""},
		{"a processing instruction after the root", `<testsuite><testcase/></testsuite><?pi x?>`, Evidence{Tests: 1}, ""},
		{"the count attributes claim more than the elements", `<testsuite tests="1000" skipped="0"><testcase/></testsuite>`, Evidence{Tests: 1}, ""},
		{"a failures count twice (the larger holds)", `<testsuite failures="1" failures="0"><testcase/></testsuite>`, Evidence{Tests: 1, Failures: 1}, ""},
		{"a skip and a failure in one case", `<testsuite><testcase><skipped/><failure/></testcase></testsuite>`, Evidence{Tests: 1, Failures: 1, Skipped: 1}, ""},
		{"a second document after the first", `<testsuite><testcase><failure/></testcase></testsuite><testsuite><testcase/></testsuite>`, Evidence{}, "more than one root"},
		{"a DOCTYPE after the root", `<testsuite><testcase/></testsuite><!DOCTYPE x>`, Evidence{}, "DOCTYPE"},
		{"text after the root", `<testsuite><testcase/></testsuite>&lt;`, Evidence{}, "outside the root"},
		{"a NUL character reference", `<testsuite><testcase>&#0;</testcase></testsuite>`, Evidence{}, "well-formed"},
		{"an unterminated end tag", `<testsuite><testcase/></testsuite`, Evidence{}, "well-formed"},
		{"truncated in an attribute", `<testsuite><testcase name="a`, Evidence{}, "well-formed"},
		{"a count with a plus", `<testsuite failures="+1"/>`, Evidence{}, "count"},
		{"a count with a blank", `<testsuite errors="1 "/>`, Evidence{}, "count"},
		{"a count in hex", `<testsuite errors="0x1"/>`, Evidence{}, "count"},
		{"a count in other digits", `<testsuite errors="\u0661"/>`, Evidence{}, "count"},
		{"a count past the limit", `<testsuite failures="1073741825"/>`, Evidence{}, "count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseJUnit("junit.xml", []byte(c.doc))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseJUnit(%q) = %+v, %v; want an error with %q", c.doc, got, err, c.err)
				}
				return
			}
			c.want.Report = "junit.xml"
			if err != nil || got != c.want {
				t.Fatalf("ParseJUnit(%q) = %+v, %v; want %+v", c.doc, got, err, c.want)
			}
		})
	}
}
