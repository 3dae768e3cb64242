package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/verdict"
)

// Warning is advice about a plan that validates: a person may heed it, and nothing fails for
// it. Path is where in the plan it applies (tasks[2].verify.changes[0]).
type Warning struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

func (w Warning) String() string { return w.Path + ": " + w.Msg }

// maxWarnings caps the warnings one plan gets; the last one says how many more there were.
const maxWarnings = 100

// GateWarnings advises on the plan's verify gates (defaults.verify, each task's own and each
// fan-out template's), in document order:
//
//   - a gate with no changes (or with a glob among them that admits every path, as "**",
//     "**/*" or "*/**" do) admits any path protect does not name, and a new file the
//     deny-list never named can change what the command runs (runner shadowing);
//   - a changes glob admitting a file a test runner reads at the root of the tree by
//     convention ("**/*.py" admits conftest.py) reopens runner shadowing;
//   - a changes or protect glob that matches a directory of the base tree (dirs: its
//     directories, repository-relative, nil when no base tree is known) but none of the files
//     under it names that path alone.
func (p *Plan) GateWarnings(dirs []string) []Warning {
	var out []Warning
	gate := func(path string, s *verdict.Spec) {
		if s == nil {
			return
		}
		if len(s.Changes) == 0 {
			out = append(out, Warning{Path: path, Msg: "no changes: the gate admits any path protect does not name, and any new file can change " +
				"what the command runs (runner shadowing such as unittest/__main__.py, conftest.py, GNUmakefile); " +
				"name what the work may change, such as changes: [src/**]"})
		}
		for i, g := range s.Changes {
			at := path + ".changes[" + strconv.Itoa(i) + "]"
			switch every, runner := admits(g); {
			case every:
				out = append(out, Warning{Path: at, Msg: fmt.Sprintf("%q admits every path, as no changes would: "+
					"name the directories the work may change", g)})
			case runner != "":
				out = append(out, Warning{Path: at, Msg: fmt.Sprintf("%q admits %s at the root of the tree, a file a test runner "+
					"reads by convention before any test (runner shadowing): name the directories the work may change, such as src/**", g, runner)})
			}
		}
		out = append(out, dirGlobs(path+".changes", s.Changes, dirs)...)
		out = append(out, dirGlobs(path+".protect", s.Protect, dirs)...)
	}
	gate("defaults.verify", p.Defaults.Verify)
	for i := range p.Tasks {
		t := &p.Tasks[i]
		tp := "tasks[" + strconv.Itoa(i) + "]"
		gate(tp+".verify", t.Verify())
		if t.FanOut() != nil {
			gate(tp+".fan_out.template.verify", t.FanOut().Template.Verify())
		}
	}
	if len(out) > maxWarnings {
		n := len(out) - maxWarnings
		out = append(out[:maxWarnings], Warning{Path: "plan", Msg: fmt.Sprintf("%d more warnings not shown", n)})
	}
	return out
}

// Paths a changes glob is tried on: one admitting all of everyPath admits every path, as
// "**" does; one admitting a runnerFile admits a file a test runner reads by convention.
var (
	everyPath  = []string{"a", ".a", "a/b", ".a/.b/c", "a/b/c/d/e.f"}
	runnerFile = []string{"conftest.py", "unittest/__main__.py", "sitecustomize.py", "GNUmakefile", "go.work", ".npmrc", "pytest.ini"}
)

// admits says whether changes glob g admits every path, and else the first runner file at the
// root of the tree it admits ("" for none).
func admits(g string) (bool, string) {
	m, err := verdict.NewMatcher([]string{g})
	if err != nil {
		return false, "" // reported by validation
	}
	every := true
	for _, p := range everyPath {
		_, ok := m.Match(p)
		every = every && ok
	}
	if every {
		return true, ""
	}
	for _, p := range runnerFile {
		if _, ok := m.Match(p); ok {
			return false, p
		}
	}
	return false, ""
}

// dirGlobs warns about each of globs that matches a directory of dirs but nothing under it
// (a name made of one NUL byte, which only a wildcard matches, stands for its files); a glob
// admitting every path has its own warning.
func dirGlobs(path string, globs, dirs []string) []Warning {
	if len(dirs) == 0 {
		return nil
	}
	var out []Warning
	for i, g := range globs {
		if every, _ := admits(g); every || strings.HasSuffix(g, "/**") {
			continue
		}
		m, err := verdict.NewMatcher([]string{g})
		if err != nil {
			continue // reported by validation
		}
		for _, d := range dirs {
			if _, ok := m.Match(d); ok {
				if _, under := m.Match(d + "/\x00"); under {
					continue
				}
				out = append(out, Warning{Path: path + "[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf(
					"%q matches %q, a directory of the base tree, as that path alone and none of the files under it: write %q",
					g, d, g+"/**")})
				break
			}
		}
	}
	return out
}
