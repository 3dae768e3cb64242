package codexrt

import (
	"path"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// shells are the programs codex wraps a command in ("/bin/bash -lc '<cmd>'").
var shells = map[string]bool{"bash": true, "sh": true, "zsh": true}

// CommandArgv returns the argv forms of a command line as codex reports it, in the order a
// grant is matched against them:
//
//   - when the line is a shell running one script ("/bin/bash -lc 'git status'") and the
//     script is a simple command (plain or quoted words; no expansion, redirection,
//     operator, glob or assignment), the script's words: ["git", "status"];
//   - the line's own words, and the same with the program's base name (["bash", "-lc",
//     "git status"]): a grant allows a shell script only by naming the shell ("bash -lc *").
//
// A line codexrt cannot split the way a shell would yields nothing, which no grant allows.
func CommandArgv(line string) [][]string {
	outer, ok := splitWords(line)
	if !ok || len(outer) == 0 {
		return nil
	}
	var out [][]string
	if len(outer) == 3 && shells[path.Base(outer[0])] && (outer[1] == "-lc" || outer[1] == "-c") {
		if inner, ok := splitWords(outer[2]); ok && len(inner) > 0 {
			out = append(out, inner)
		}
	}
	out = append(out, outer)
	if b := path.Base(outer[0]); b != outer[0] {
		out = append(out, append([]string{b}, outer[1:]...))
	}
	return out
}

// CommandAllowed reports whether any argv form of line (see [CommandArgv]) matches one of
// the grant's command patterns.
func CommandAllowed(patterns []string, line string) bool {
	for _, argv := range CommandArgv(line) {
		if grant.CommandAllowed(patterns, argv) {
			return true
		}
	}
	return false
}

// unquotedSpecial are the characters that mean something to a shell outside quotes.
const unquotedSpecial = ";&|<>()$`\\*?[]{}~#!\n\r\"'"

// splitWords splits s into words as a POSIX shell would for a simple command, and reports
// false for anything that is more than that: an operator, a redirection, an expansion, a
// glob, an assignment before the program, an escape, or an unterminated quote. Words may be single-quoted
// (literal) or double-quoted when the quoted text holds no $, ` or \.
func splitWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 || strings.ContainsAny(s[i+1:i+1+j], "$`\\!") {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case strings.IndexByte(unquotedSpecial, c) >= 0 || c < 0x20 || c == 0x7f:
			return nil, false
		case c == '=' && len(words) == 0:
			// NAME=value before the program sets a variable for it (LD_PRELOAD=...).
			return nil, false
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}
