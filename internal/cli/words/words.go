// Package words splits a command line a person typed (agora subagent register --command) into
// words the way a POSIX shell does, without any expansion, and accepts any such line: an
// operator is a word like another. internal/shellwords is the strict reader, for a grant that
// judges the argv a shell will run. It is a leaf (the standard library only) so its fuzz target
// links little.
package words

import (
	"errors"
	"strings"
)

// Split splits a command line the way a POSIX shell splits words, without any expansion:
// whitespace separates words, 'single quotes' keep everything literal, "double quotes" keep
// everything but \" and \\, and a backslash outside quotes escapes the next character.
func Split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
