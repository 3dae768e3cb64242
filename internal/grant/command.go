package grant

import (
	"fmt"
	"path"
	"strings"
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
