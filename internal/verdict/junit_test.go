package verdict

import (
	"strings"
	"testing"
)

const pytestReport = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="0.05">
<testcase classname="tests.test_calc" name="test_add" time="0.001"/>
<testcase classname="tests.test_calc" name="test_sub" time="0.001"><failure message="assert 1 == 2">tests/test_calc.py:9: AssertionError</failure></testcase>
<testcase classname="tests.test_calc" name="test_mul" time="0.001"><skipped type="pytest.skip" message="later"/></testcase>
<testcase classname="tests.test_calc" name="test_div" time="0.001"><system-out>hi</system-out></testcase>
</testsuite></testsuites>`

func TestParseJUnit(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      Evidence
	}{
		{"pytest", pytestReport, Evidence{Tests: 4, Failures: 1, Skipped: 1}},
		{"bare testsuite", `<testsuite tests="2"><testcase name="a"/><testcase name="b"/></testsuite>`, Evidence{Tests: 2}},
		{"nested suites (surefire, jest)", `<testsuites><testsuite><testsuite><testcase name="a"><error/></testcase></testsuite></testsuite></testsuites>`, Evidence{Tests: 1, Errors: 1}},
		{"a failure counted once per case", `<testsuite><testcase><failure/><failure/><error/></testcase></testsuite>`, Evidence{Tests: 1, Failures: 1, Errors: 1}},
		{"a suite error no case carries", `<testsuites errors="1"><testsuite errors="1" tests="0"/></testsuites>`, Evidence{Errors: 1}},
		{"empty suite", `<testsuites/>`, Evidence{}},
		{"attributes do not count tests", `<testsuite tests="500"></testsuite>`, Evidence{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseJUnit("junit.xml", []byte(c.doc))
			c.want.Report = "junit.xml"
			if err != nil || got != c.want {
				t.Fatalf("ParseJUnit = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestParseJUnit_Refuses(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"empty", ``, "no root"},
		{"not XML", `PASS`, "outside the root"},
		{"text root", `ok <testsuite/>`, "outside the root"},
		{"wrong root", `<html><testcase/></html>`, "root element is <html>"},
		{"two roots", `<testsuite/><testsuite/>`, "more than one root"},
		{"doctype", `<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>`, "DOCTYPE"},
		{"entity", `<testsuite name="&a;"/>`, "well-formed"},
		{"unclosed", `<testsuite><testcase>`, "well-formed"},
		{"mismatched", `<testsuite></testsuites>`, "well-formed"},
		{"latin-1", `<?xml version="1.0" encoding="ISO-8859-1"?><testsuite/>`, "well-formed"},
		{"invalid UTF-8", "<testsuite name=\"\xff\"/>", "well-formed"},
		{"bad count", `<testsuite failures="-1"/>`, "count"},
		{"float count", `<testsuite errors="0.0"/>`, "count"},
		{"huge count", `<testsuite errors="99999999999"/>`, "count"},
		{"stray testcase", `<testsuites><testcase/></testsuites>`, "<testcase> inside <testsuites>"},
		{"nested testcase", `<testsuite><testcase><testcase/></testcase></testsuite>`, "<testcase> inside <testcase>"},
		{"suite in a case", `<testsuite><testcase><testsuite/></testcase></testsuite>`, "<testsuite> inside <testcase>"},
		{"too deep", strings.Repeat("<testsuite>", 70) + strings.Repeat("</testsuite>", 70), "nested more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJUnit("r.xml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseJUnit(%q) = %v, want an error containing %q", c.doc, err, c.want)
			}
		})
	}
	big := make([]byte, MaxReport+1)
	if _, err := ParseJUnit("r.xml", big); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an oversized report: %v", err)
	}
}

func TestEvidence_Judge(t *testing.T) {
	for _, c := range []struct {
		e    Evidence
		min  int
		want string
	}{
		{Evidence{Report: "j.xml", Tests: 3}, 3, ""},
		{Evidence{Report: "j.xml", Tests: 3, Skipped: 1}, 3, "2 test(s) that ran, fewer than the 3"},
		{Evidence{Report: "j.xml", Tests: 0}, 1, "0 test(s) that ran"},
		{Evidence{Report: "j.xml", Tests: 3, Failures: 1}, 1, "1 failure(s)"},
		{Evidence{Report: "j.xml", Tests: 3, Errors: 2}, 1, "2 error(s)"},
	} {
		got := c.e.Judge(c.min)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Judge(%+v, %d) = %q, want %q", c.e, c.min, got, c.want)
		}
	}
}
