package verdict

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMatch checks the protect matcher against a plain recursive reference on every pattern
// it accepts, and that nothing panics.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"**/*_test.go", "a/b_test.go"}, {".github/**", ".github"}, {"[!a-c]?{x,y}", "dex"},
		{`a\*b`, "a*b"}, {"*a*a*b", "aaaaac"}, {"{a,{b,c}}/**/d", "c/x/d"}, {"[]-]", "-"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, path string) {
		pats, err := compile(glob)
		if err != nil {
			if _, merr := Match(glob, path); merr == nil {
				t.Fatalf("Match accepted %q, which compile refuses", glob)
			}
			return
		}
		if !utf8.ValidString(path) {
			return
		}
		if len(glob) > 32 || len(path) > 64 {
			// The reference is exponential in the stars; the matcher alone must not panic.
			Match(glob, path)
			return
		}
		segs := strings.Split(path, "/")
		want := false
		for _, p := range pats {
			if refSegments(p, segs) {
				want = true
			}
		}
		got, err := Match(glob, path)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, the reference says %v", glob, path, got, want)
		}
	})
}

func refSegments(p, s []string) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	if p[0] == "**" {
		for i := 0; i <= len(s); i++ {
			if refSegments(p[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return len(s) > 0 && refSegment(p[0], s[0]) && refSegments(p[1:], s[1:])
}

func refSegment(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if utf8.RuneStart(byteAt(s, i)) && refSegment(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		if s == "" {
			return false
		}
		_, n := utf8.DecodeRuneInString(s)
		return refSegment(p[1:], s[n:])
	case '[':
		n, _ := classLen(p)
		if s == "" {
			return false
		}
		r, rn := utf8.DecodeRuneInString(s)
		return inClass(p[:n], r) && refSegment(p[n:], s[rn:])
	case '\\':
		return s != "" && s[0] == p[1] && refSegment(p[2:], s[1:])
	}
	return s != "" && s[0] == p[0] && refSegment(p[1:], s[1:])
}

// byteAt is s[i], or a rune start past its end.
func byteAt(s string, i int) byte {
	if i >= len(s) {
		return 'a'
	}
	return s[i]
}

// FuzzParse checks that a verdict read back is one agora writes (Check holds), and that
// what Parse accepts re-encodes to a document Parse reads to the same verdict.
func FuzzParse(f *testing.F) {
	v := Red(ReasonExit, "exit status 1", 1, []string{"go", "test"}, 0, TailText{Text: "FAIL\n", Total: 5})
	b, _ := json.Marshal(v)
	f.Add(b)
	g, _ := json.Marshal(Protected([]string{"true"}, []string{"x_test.go"}))
	f.Add(g)
	o, _ := json.Marshal(OutsideChanges([]string{"make", "test"}, []string{"src/**"}, []Offence{{Path: "GNUmakefile", Why: "outside changes"}}))
	f.Add(o)
	ev := Green([]string{"true"}, 0, TailText{})
	ev.Evidence = &Evidence{Report: "junit.xml", Tests: 3, Skipped: 1}
	e, _ := json.Marshal(ev)
	f.Add(e)
	f.Add([]byte(`{"passed":true,"exit":0,"command":["true"],"output_tail":"","output_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","output_bytes":0,"duration_ms":1}`))
	f.Add([]byte(`{"passed":true,"exit":0,"command":["true"],"output_tail":"","output_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","output_bytes":0,"duration_ms":1,"cache":"/var/cache/agora-verify"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b)
		if err != nil {
			return
		}
		if err := v.Check(); err != nil {
			t.Fatalf("Parse accepted a verdict Check refuses: %v", err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Parse(again)
		if err != nil {
			t.Fatalf("re-encoded verdict does not parse: %v", err)
		}
		if w.Digest() != v.Digest() {
			t.Fatal("re-encoded verdict has another digest")
		}
	})
}

// FuzzParseSpec checks that an accepted spec validates and round-trips.
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(`{"command":["go","test","./..."],"timeout":"10m","protect":["**/*_test.go",".github/**"]}`))
	f.Add([]byte(`{"command":["true"]}`))
	f.Add([]byte(`{"command":["make","test"],"changes":["src/**"],"expect":{"junit":"junit.xml","min_tests":2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSpec accepted an invalid spec: %v", err)
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseSpec(again)
		if err != nil {
			t.Fatalf("re-encoded spec does not parse: %v (%s)", err, again)
		}
		if back.Timeout != s.Timeout || strings.Join(back.Command, "\x00") != strings.Join(s.Command, "\x00") ||
			strings.Join(back.Protect, "\x00") != strings.Join(s.Protect, "\x00") ||
			strings.Join(back.Changes, "\x00") != strings.Join(s.Changes, "\x00") ||
			(back.Expect == nil) != (s.Expect == nil) || (s.Expect != nil && *back.Expect != *s.Expect) {
			t.Fatalf("round trip changed the spec: %+v -> %+v", s, back)
		}
	})
}

// FuzzParseJUnit checks that no report panics the parser and that what it accepts has sane
// counts (a skipped or failed case is a case; a passing verdict's evidence holds).
func FuzzParseJUnit(f *testing.F) {
	f.Add([]byte(pytestReport))
	f.Add([]byte(`<testsuite><testcase><skipped/></testcase></testsuite>`))
	f.Add([]byte(`<testsuites errors="3"><testsuite><testsuite/></testsuite></testsuites>`))
	f.Add([]byte(`<?xml version="1.0"?><!-- c --><testsuite><?pi x?><testcase><![CDATA[x]]></testcase></testsuite>`))
	f.Add([]byte("\xef\xbb\xbf<testsuite><testcase><failure/></testcase></testsuite>"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseJUnit("junit.xml", b)
		if err != nil {
			return
		}
		if e.Tests < 0 || e.Failures < 0 || e.Errors < 0 || e.Skipped < 0 || e.Skipped > e.Tests {
			t.Fatalf("counts %+v", e)
		}
		if err := e.check(); err != nil {
			t.Fatalf("accepted evidence fails its check: %v", err)
		}
	})
}

// FuzzAdmit checks the changes check against the matcher on any path and link target: a
// path no changes glob matches is never admitted, a regular file a glob matches always is,
// a link is admitted only when its target resolves inside the tree to an admitted path, and
// nothing panics.
func FuzzAdmit(f *testing.F) {
	f.Add("src/**", "src/a.py", uint32(ModeFile), "")
	f.Add("src/**", "src/l", uint32(ModeSymlink), "../tests/x")
	f.Add("{src,docs}/**", "docs/l", uint32(ModeSymlink), "../src/./a/../b")
	f.Add("**", "x", uint32(ModeGitlink), "")
	f.Add("src/**", "\xff/a", uint32(ModeExec), "")
	f.Fuzz(func(t *testing.T, glob, p string, mode uint32, target string) {
		m, err := NewMatcher([]string{glob})
		if err != nil {
			return
		}
		links := map[string]string{"src/up": "..", "src/self": "self", "docs/abs": "/x"}
		lookup := func(p string) (string, bool) { s, ok := links[p]; return s, ok }
		off := Admit(m, nil, []Change{{Path: p, NewMode: mode, Target: target}}, lookup)
		_, in := m.Match(p)
		switch {
		case !in && len(off) != 1:
			t.Fatalf("%q outside %q admitted", p, glob)
		case in && (mode == ModeFile || mode == ModeExec || mode == ModeAbsent) && len(off) != 0:
			t.Fatalf("%q inside %q refused: %s", p, glob, off[0].Why)
		case in && mode == ModeGitlink && len(off) != 1:
			t.Fatalf("gitlink %q admitted", p)
		case in && mode == ModeSymlink:
			to, err := ResolveLink(p, target, lookup)
			if err == nil {
				if strings.HasPrefix(to, "/") || to == ".." || strings.HasPrefix(to, "../") || strings.Contains("/"+to+"/", "/../") {
					t.Fatalf("link %q -> %q resolved outside the tree: %q", p, target, to)
				}
			}
			_, toIn := m.Match(to)
			if admitted := len(off) == 0; admitted != (err == nil && toIn) {
				t.Fatalf("link %q -> %q (resolved %q, %v): admitted %v", p, target, to, err, admitted)
			}
		}
		if len(off) > 0 {
			v := OutsideChanges([]string{"true"}, []string{glob}, off)
			if err := v.Check(); err != nil {
				t.Fatalf("verdict of %q: %v", p, err)
			}
			_ = v.Digest()
		}
	})
}
