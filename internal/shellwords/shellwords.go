// Package shellwords reads a shell command line the way a POSIX shell (sh, bash) reads a
// simple command, so that a grant can judge the argv the shell will run and not the text.
//
// [Split] returns the words of a line that is one simple command made of literal words
// (plain, 'single-quoted', "double-quoted" or backslash-escaped text), exactly as the shell
// would pass them to the program, or an error saying why the line is something else: an
// operator (; & | && ||), a redirection, an expansion ($, `), a glob, brace or tilde
// expansion, a comment, an assignment before the program, a reserved word, or a quote left
// open. What it cannot read exactly it refuses; it never guesses.
//
// It is pure (no I/O, no agora imports) and runs on both sides of the sandbox: the codex
// runtime judges the command codex runs with it, and so does the Claude Code hook.
package shellwords

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLine bounds the line Split reads.
const MaxLine = 1 << 20

// Error says why a line is not one simple command of literal words: Reason names what was
// found, Offset is the byte where.
type Error struct {
	Offset int
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("not one simple command: %s at byte %d", e.Reason, e.Offset)
}

// ErrEmpty is the error of a line that holds no command at all.
var ErrEmpty = errors.New("not one simple command: the line is empty")

// unquoted names what each byte that is special to the shell outside quotes means there; a
// byte not in it is an ordinary word character. Blanks, quotes and the backslash are handled
// by Split itself.
func unquoted(c byte) string {
	switch c {
	case ';', '&', '|':
		return fmt.Sprintf("the operator %q (more than one command)", c)
	case '<', '>':
		return fmt.Sprintf("the redirection %q", c)
	case '(', ')':
		return fmt.Sprintf("%q (a subshell or function)", c)
	case '$', '`':
		return fmt.Sprintf("the expansion %q", c)
	case '*', '?', '[':
		return fmt.Sprintf("the glob %q", c)
	case '{', '}':
		return fmt.Sprintf("%q (brace expansion or a group)", c)
	case '~':
		return `"~" (tilde expansion)`
	case '!':
		return `"!" (negation or history expansion)`
	case '\n':
		return "a newline (more than one command)"
	case 0:
		return "a NUL byte"
	}
	if c < 0x20 || c == 0x7f {
		return fmt.Sprintf("the control character %#02x", c)
	}
	return ""
}

// reserved reports whether w is a word a shell reads as syntax when it starts a command
// (POSIX's reserved words and bash's own): "time git push" runs git push, which is not its argv.
func reserved(w string) bool {
	switch w {
	case "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in",
		"then", "until", "while", "[[", "]]", "function", "select", "time", "coproc":
		return true
	}
	return false
}

// Split returns the argv of line when it is one simple command of literal words, as POSIX sh
// (and bash, in its non-interactive default mode) reads it:
//
//   - blanks (space, tab) outside quotes separate words;
//   - 'single quotes' keep every byte up to the next ' literally;
//   - inside "double quotes" a backslash escapes only $ ` " \ and newline (the backslash is
//     dropped; before a newline both go), and stays a backslash before anything else; an
//     unescaped $ or ` inside them (an expansion) is refused;
//   - outside quotes a backslash makes the next byte literal, and a backslash-newline joins
//     lines;
//   - a # that starts a word (a comment), an = in the first word (an assignment), a first
//     word that is a reserved word, and every operator, redirection, expansion, glob, brace,
//     tilde, ! and control character outside quotes are refused, as is a NUL anywhere.
//
// It returns an [*Error] (or [ErrEmpty]) for any other line, and never panics.
func Split(line string) ([]string, error) {
	if len(line) > MaxLine {
		return nil, &Error{Offset: MaxLine, Reason: fmt.Sprintf("a line over %d bytes", MaxLine)}
	}
	var (
		words  []string
		cur    strings.Builder
		inWord bool // cur holds a word (possibly empty: '')
		quoted bool // some byte of cur was quoted or escaped
	)
	end := func(at int) error {
		if !inWord {
			return nil
		}
		w := cur.String()
		if len(words) == 0 && !quoted && reserved(w) {
			return &Error{Offset: at, Reason: fmt.Sprintf("the reserved word %q", w)}
		}
		words = append(words, w)
		cur.Reset()
		inWord, quoted = false, false
		return nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if err := end(i); err != nil {
				return nil, err
			}
			i++
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, &Error{Offset: i, Reason: "a single quote left open"}
			}
			if k := strings.IndexByte(line[i+1:i+1+j], 0); k >= 0 {
				return nil, &Error{Offset: i + 1 + k, Reason: "a NUL byte"}
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 2
		case c == '"':
			n, err := doubleQuoted(line, i, &cur)
			if err != nil {
				return nil, err
			}
			inWord, quoted = true, true
			i = n
		case c == '\\':
			if i+1 >= len(line) {
				return nil, &Error{Offset: i, Reason: "a backslash at the end of the line"}
			}
			switch next := line[i+1]; next {
			case '\n': // a line continuation: both bytes vanish, the word goes on
			case 0:
				return nil, &Error{Offset: i + 1, Reason: "a NUL byte"}
			default:
				cur.WriteByte(next)
				inWord, quoted = true, true
			}
			i += 2
		case c == '#' && !inWord:
			return nil, &Error{Offset: i, Reason: `"#" (a comment)`}
		case c == '=' && len(words) == 0:
			return nil, &Error{Offset: i, Reason: `"=" in the first word (a variable assignment)`}
		default:
			if r := unquoted(c); r != "" {
				return nil, &Error{Offset: i, Reason: r}
			}
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if err := end(len(line)); err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, ErrEmpty
	}
	return words, nil
}

// doubleQuoted appends to cur the text of the double-quoted string that opens at line[start]
// and returns the index just past its closing quote.
func doubleQuoted(line string, start int, cur *strings.Builder) (int, error) {
	for i := start + 1; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 >= len(line) {
				return 0, &Error{Offset: start, Reason: "a double quote left open"}
			}
			switch next := line[i+1]; next {
			case '$', '`', '"', '\\':
				cur.WriteByte(next)
				i++
			case '\n':
				i++
			default: // the backslash is literal; the next byte is read on its own
				cur.WriteByte('\\')
			}
		case '$', '`':
			return 0, &Error{Offset: i, Reason: fmt.Sprintf("the expansion %q inside double quotes", c)}
		case 0:
			return 0, &Error{Offset: i, Reason: "a NUL byte"}
		default:
			cur.WriteByte(c)
		}
	}
	return 0, &Error{Offset: start, Reason: "a double quote left open"}
}
