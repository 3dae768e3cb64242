package grant

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/shellwords"
)

// CommandPattern is an argv allow-pattern from a grant's Commands. It is written as
// words separated by spaces: a literal word matches itself, a word with * or ? or [..]
// matches as a glob over one argument (path.Match rules: * does not cross "/"), "*" alone
// matches any one argument, and "**" as the LAST word matches any number of
// remaining arguments (including none). There is no shell: a pattern grants a shell only by
// naming it, as in "sh -c *".
type CommandPattern struct {
	words []string
	rest  bool // ended in "**"
}

const maxCommandPatternWords = 64

// ParseCommandPattern checks and parses one pattern.
func ParseCommandPattern(s string) (CommandPattern, error) {
	words := strings.Fields(s)
	if len(words) == 0 {
		return CommandPattern{}, fmt.Errorf("empty command pattern")
	}
	if len(words) > maxCommandPatternWords {
		return CommandPattern{}, fmt.Errorf("command pattern has more than %d words", maxCommandPatternWords)
	}
	var p CommandPattern
	for i, w := range words {
		if w == "**" {
			if i != len(words)-1 {
				return CommandPattern{}, fmt.Errorf("command pattern %q: ** may only be the last word", s)
			}
			if i == 0 {
				return CommandPattern{}, fmt.Errorf("command pattern %q: the program must be named", s)
			}
			p.rest = true
			break
		}
		if _, err := path.Match(w, ""); err != nil {
			return CommandPattern{}, fmt.Errorf("command pattern %q: bad glob %q", s, w)
		}
		p.words = append(p.words, w)
	}
	if p.words[0] == "*" {
		return CommandPattern{}, fmt.Errorf("command pattern %q: the program must be named, not *", s)
	}
	return p, nil
}

// Match reports whether argv is allowed by the pattern.
func (p CommandPattern) Match(argv []string) bool {
	if len(argv) < len(p.words) || (!p.rest && len(argv) != len(p.words)) {
		return false
	}
	for i, w := range p.words {
		if w == "*" {
			continue
		}
		if ok, _ := path.Match(w, argv[i]); !ok {
			return false
		}
	}
	return true
}

// CommandAllowed reports whether argv matches any of the patterns.
func CommandAllowed(patterns []string, argv []string) bool {
	for _, s := range patterns {
		p, err := ParseCommandPattern(s)
		if err == nil && p.Match(argv) {
			return true
		}
	}
	return false
}

// shellForms are the argvs a shell command line runs as when a grant names a shell for it:
// a grant allows any line only by naming one of these ("bash -c *", "bash -lc *",
// "sh -c *"), as codex's commands are granted.
func shellForms(line string) [][]string {
	return [][]string{{"bash", "-c", line}, {"bash", "-lc", line}, {"sh", "-c", line}}
}

// CommandLineAllowed reports whether a shell command line (Claude Code's Bash) runs only what
// patterns allow: the line is one simple command of literal words whose argv, read as a
// POSIX shell reads it ([shellwords.Split]), a pattern matches; or the patterns name a shell
// to run any line ([shellForms]). Otherwise why says, for the model, why not.
func CommandLineAllowed(patterns []string, line string) (ok bool, why string) {
	words, err := shellwords.Split(line)
	if err == nil && CommandAllowed(patterns, words) {
		return true, ""
	}
	for _, argv := range shellForms(line) {
		if CommandAllowed(patterns, argv) {
			return true, ""
		}
	}
	granted := "no commands are granted"
	if len(patterns) > 0 {
		q := make([]string, len(patterns))
		for i, p := range patterns {
			q[i] = strconv.Quote(p)
		}
		granted = "the grant allows " + strings.Join(q, ", ")
	}
	if err != nil {
		return false, fmt.Sprintf("this command line is %v, and the grant names no shell to run it (such as \"bash -c *\"); %s", err, granted)
	}
	return false, fmt.Sprintf("command %s is not covered by this subagent's grant; %s", quoteArgv(words), granted)
}

// quoteArgv writes argv for a message, each word quoted, cut after 16 words.
func quoteArgv(argv []string) string {
	q := make([]string, 0, min(len(argv), 16)+1)
	for i, w := range argv {
		if i == 16 {
			q = append(q, "...")
			break
		}
		if len(w) > 80 {
			w = w[:80] + "..."
		}
		q = append(q, strconv.Quote(w))
	}
	return "[" + strings.Join(q, " ") + "]"
}

// RunsAnyLine reports whether p allows any shell command line to run through a shell
// ([CommandLineAllowed]): "bash -c *", "bash -lc *", "sh -c *", "bash **" and the like. It
// asks p about a line only a lone * or ** matches (no glob word matches a NUL, then a
// slash), so a yes holds for every line.
func (p CommandPattern) RunsAnyLine() bool {
	for _, argv := range shellForms("\x00/\x00") {
		if p.Match(argv) {
			return true
		}
	}
	return false
}
