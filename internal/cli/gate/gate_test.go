package gate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/verdict"
)

// TestPrintGate_ChangesExpect: the gate line names its changes and the evidence it expects;
// a green verdict with evidence says the counts, a red one its paths.
func TestPrintGate_ChangesExpect(t *testing.T) {
	spec := &verdict.Spec{Command: []string{"make", "test"}, Timeout: verdict.DefaultTimeout, Changes: []string{"src/**"},
		Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 3}}
	v := verdict.Green(spec.Command, 2*time.Second, verdict.TailText{})
	v.Evidence = &verdict.Evidence{Report: "junit.xml", Tests: 4, Skipped: 1}
	var b bytes.Buffer
	Print(&b, "verify:    ", spec, &v, 0)
	for _, want := range []string{
		"verify:    make test (timeout 10m0s; changes src/**; expect junit.xml with at least 3 test(s))\n",
		"           verdict passed (exit 0, 2s; 4 tests, 0 failures, 0 errors, 1 skipped)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	red := verdict.OutsideChanges(spec.Command, spec.Changes, []verdict.Offence{{Path: "GNUmakefile", Why: "outside changes"}})
	Print(&b, "verify:    ", spec, &red, 0)
	if want := `verdict failed: outside-changes: the patch touches 1 path(s) the gate does not admit (changes: src/**): "GNUmakefile" (outside changes); the command did not run`; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}
