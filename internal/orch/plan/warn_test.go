package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGateWarnings(t *testing.T) {
	p := mustParse(t, head+
		"  - {id: a, subagent: s, verify: {command: [make, test], protect: [tests, '**/test_*.py']}}\n"+
		"  - {id: b, subagent: s, verify: {command: [make, test], changes: ['src/**', 'docs', 'lib/*'], protect: ['src/gen/**']}}\n"+
		"  - {id: c, subagent: s}\n"+
		"  - {id: d, fan_out: {from: b, select: 'output:l.json', template: {subagent: s, verify: {command: [t], changes: ['**']}}}}\n")
	dirs := []string{"docs", "lib", "lib/sub", "src", "src/gen", "tests"}
	var got []string
	for _, w := range p.GateWarnings(dirs) {
		got = append(got, w.String())
	}
	want := []string{
		"tasks[0].verify: no changes: the gate admits any path protect does not name, and any new file can change what the command runs (runner shadowing such as unittest/__main__.py, conftest.py, GNUmakefile); name what the work may change, such as changes: [src/**]",
		`tasks[0].verify.protect[0]: "tests" matches "tests", a directory of the base tree, as that path alone and none of the files under it: write "tests/**"`,
		`tasks[1].verify.changes[1]: "docs" matches "docs", a directory of the base tree, as that path alone and none of the files under it: write "docs/**"`,
		`tasks[1].verify.changes[2]: "lib/*" matches "lib/sub", a directory of the base tree, as that path alone and none of the files under it: write "lib/*/**"`,
		`tasks[3].fan_out.template.verify.changes[0]: "**" admits every path, as no changes would: name the directories the work may change`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// Without a base tree, only the gates without changes (or with "**").
	if w := p.GateWarnings(nil); len(w) != 2 || w[0].Path != "tasks[0].verify" || w[1].Path != "tasks[3].fan_out.template.verify.changes[0]" {
		t.Errorf("without a base tree: %v", w)
	}
	d := mustParse(t, head+"  - {id: a, subagent: s}\ndefaults: {verify: {command: [t]}}\n")
	if w := d.GateWarnings(nil); len(w) != 1 || w[0].Path != "defaults.verify" {
		t.Errorf("defaults: %v", w)
	}
	if w := mustParse(t, head+"  - {id: a, subagent: s, verify: {command: [t], changes: [src/**, '**']}}\n").GateWarnings(nil); len(w) != 1 ||
		w[0].String() != `tasks[0].verify.changes[1]: "**" admits every path, as no changes would: name the directories the work may change` {
		t.Errorf("changes [**]: %v", w)
	}
	if w := mustParse(t, head+"  - {id: a, subagent: s}\n").GateWarnings(dirs); len(w) != 0 {
		t.Errorf("a plan without gates: %v", w)
	}
}
