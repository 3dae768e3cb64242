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
//   - a gate with no changes (or with "**" among them) admits any path protect does not
//     name, and a new file the deny-list never named can change what the command runs
//     (runner shadowing);
//   - a changes or protect glob that does not end in "/**" but matches a directory of the
//     base tree (dirs: its directories, repository-relative, nil when no base tree is known)
//     names that path alone, not the files under it.
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
			if g == "**" {
				out = append(out, Warning{Path: path + ".changes[" + strconv.Itoa(i) + "]", Msg: "\"**\" admits every path, as no changes would: " +
					"name the directories the work may change"})
			}
		}
		out = append(out, dirGlobs(path+".changes", s.Changes, dirs)...)
		out = append(out, dirGlobs(path+".protect", s.Protect, dirs)...)
	}
	gate("defaults.verify", p.Defaults.Verify)
	for i := range p.Tasks {
		t := &p.Tasks[i]
		tp := "tasks[" + strconv.Itoa(i) + "]"
		gate(tp+".verify", t.Verify)
		if t.FanOut != nil {
			gate(tp+".fan_out.template.verify", t.FanOut.Template.Verify)
		}
	}
	if len(out) > maxWarnings {
		n := len(out) - maxWarnings
		out = append(out[:maxWarnings], Warning{Path: "plan", Msg: fmt.Sprintf("%d more warnings not shown", n)})
	}
	return out
}

// dirGlobs warns about each of globs that names a directory of dirs without "/**".
func dirGlobs(path string, globs, dirs []string) []Warning {
	if len(dirs) == 0 {
		return nil
	}
	var out []Warning
	for i, g := range globs {
		if g == "**" || strings.HasSuffix(g, "/**") {
			continue
		}
		m, err := verdict.NewMatcher([]string{g})
		if err != nil {
			continue // reported by validation
		}
		for _, d := range dirs {
			if _, ok := m.Match(d); ok {
				out = append(out, Warning{Path: path + "[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf(
					"%q matches %q, a directory of the base tree, as that path alone and none of the files under it: write %q",
					g, d, g+"/**")})
				break
			}
		}
	}
	return out
}
