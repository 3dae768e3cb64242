package verdict

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// A gate with [Expect] judges its command by evidence as well as its exit status: code the
// tests import runs inside the test process, and a module that exits 0 as it is imported (a Go
// init, a Python module calling os._exit(0)) ends the run before any test with the status of
// success. The JUnit XML report the runner writes at its end is the evidence that the tests
// it names ran: agora reads it from a directory it made for the gate (never from the tree the
// patch fills) once every process of the sandbox is gone, and counts what it says.

// MaxReport caps the bytes of a JUnit report the host reads.
const MaxReport = 16 << 20

// Limits of a report's structure.
const (
	maxReportDepth = 64      // nested elements
	maxReportCount = 1 << 30 // a count attribute's value
)

// Evidence is what a JUnit report said: its file name and its counts. Tests counts the
// <testcase> elements; Failures, Errors and Skipped count those with a <failure>, <error> or
// <skipped> child, or the largest count a suite's failures or errors attribute states when
// that is more (a suite can report an error that no test case carries).
type Evidence struct {
	Report   string `json:"report"`
	Tests    int64  `json:"tests"`
	Failures int64  `json:"failures"`
	Errors   int64  `json:"errors"`
	Skipped  int64  `json:"skipped"`
}

// Ran is how many tests ran: Tests less Skipped.
func (e Evidence) Ran() int64 { return e.Tests - e.Skipped }

// Summary is "12 tests, 0 failures, 0 errors, 1 skipped".
func (e Evidence) Summary() string {
	return fmt.Sprintf("%d tests, %d failures, %d errors, %d skipped", e.Tests, e.Failures, e.Errors, e.Skipped)
}

func (e *Evidence) check() error {
	switch {
	case checkReportName(e.Report) != nil:
		return fmt.Errorf("verdict evidence report %q: not a report name", clip(e.Report, 80))
	case e.Tests < 0 || e.Failures < 0 || e.Errors < 0 || e.Skipped < 0:
		return errors.New("verdict evidence has a negative count")
	case e.Skipped > e.Tests:
		return errors.New("verdict evidence skips more tests than it counts")
	}
	return nil
}

// Judge says why e does not show that at least min tests ran and passed, or "".
func (e Evidence) Judge(min int) string {
	switch {
	case e.Failures > 0 || e.Errors > 0:
		return fmt.Sprintf("the command exited 0 but its report %s names %d failure(s) and %d error(s) (%s)", e.Report, e.Failures, e.Errors, e.Summary())
	case e.Ran() < int64(min):
		return fmt.Sprintf("the command exited 0 but its report %s shows %d test(s) that ran, fewer than the %d the gate expects (%s)", e.Report, e.Ran(), min, e.Summary())
	}
	return ""
}

// ParseJUnit reads a JUnit XML report (the form pytest, Maven Surefire, go-junit-report,
// gotestsum, jest-junit and unittest-xml-reporting write): one root element, <testsuites> or
// <testsuite>, holding suites (nested or not) of <testcase> elements. It is strict: UTF-8
// only (a leading byte order mark allowed, as XML allows it), no DOCTYPE or entity
// declaration, well formed, at most [MaxReport] bytes and [maxReportDepth] deep, a suite's
// failures and errors attributes decimal counts. name is the report's file name, kept in the
// evidence.
func ParseJUnit(name string, b []byte) (Evidence, error) {
	e := Evidence{Report: name}
	if len(b) > MaxReport {
		return e, fmt.Errorf("%d bytes; at most %d", len(b), MaxReport)
	}
	// A UTF-8 byte order mark is part of the encoding, not text before the root (.NET and
	// PowerShell runners write one); encoding/xml would read it as text.
	d := xml.NewDecoder(bytes.NewReader(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))))
	d.Strict = true
	// No CharsetReader: a report declaring another encoding than UTF-8 is an error.
	var stack []string
	var failed, errored, skipped bool // of the open testcase: a child of each kind seen
	roots := 0
	var attrFailures, attrErrors int64
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return e, fmt.Errorf("not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			el := t.Name.Local
			if len(stack) >= maxReportDepth {
				return e, fmt.Errorf("elements nested more than %d deep", maxReportDepth)
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch {
			case len(stack) == 0:
				if roots++; roots > 1 {
					return e, errors.New("more than one root element")
				}
				if el != "testsuites" && el != "testsuite" {
					return e, fmt.Errorf("the root element is <%s>; want <testsuites> or <testsuite>", clip(el, 64))
				}
			case el == "testcase" && parent == "testsuite":
				e.Tests++
				failed, errored, skipped = false, false, false
			case el == "testcase":
				return e, fmt.Errorf("a <testcase> inside <%s>; want it inside a <testsuite>", clip(parent, 64))
			case el == "testsuite" && parent != "testsuites" && parent != "testsuite":
				return e, fmt.Errorf("a <testsuite> inside <%s>", clip(parent, 64))
			case parent == "testcase":
				switch el {
				case "failure":
					if !failed {
						e.Failures++
					}
					failed = true
				case "error":
					if !errored {
						e.Errors++
					}
					errored = true
				case "skipped":
					if !skipped {
						e.Skipped++
					}
					skipped = true
				}
			}
			if el == "testsuite" || el == "testsuites" {
				for _, a := range t.Attr {
					if a.Name.Space != "" {
						continue
					}
					switch a.Name.Local {
					case "failures", "errors":
						n, err := parseCount(a.Value)
						if err != nil {
							return e, fmt.Errorf("<%s %s=%q>: %w", el, a.Name.Local, clip(a.Value, 32), err)
						}
						if a.Name.Local == "failures" {
							attrFailures = max(attrFailures, n)
						} else {
							attrErrors = max(attrErrors, n)
						}
					}
				}
			}
			stack = append(stack, el)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.Directive:
			return e, errors.New("a DOCTYPE or other <!...> declaration; a report has none")
		case xml.CharData:
			if len(stack) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return e, errors.New("text outside the root element")
			}
		}
	}
	if roots == 0 {
		return e, errors.New("no root element")
	}
	e.Failures = max(e.Failures, attrFailures)
	e.Errors = max(e.Errors, attrErrors)
	return e, nil
}

// parseCount reads a count attribute: decimal digits only, at most maxReportCount.
func parseCount(s string) (int64, error) {
	if s == "" || len(s) > 10 {
		return 0, errors.New("want a count")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want a count")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxReportCount {
		return 0, errors.New("want a count")
	}
	return n, nil
}
