package mcpserver

import (
	"fmt"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// What an agent or its sandbox wrote (a question and its options, a failure's detail, the
// tails of its logs, its outputs' names, its patch and final.md inline, a verdict's output, a
// reviewer's reasons) reaches an MCP client with every character [agenttext.Hidden] reports
// escaped, as the CLI prints it and the web view shows it: no bidirectional control may
// reorder what a client shows (invoice<U+202E>fdp.exe reading invoiceexe.pdf), no control
// character may drive a terminal, and nothing drawn as nothing may hide text. As the web view
// does, escaping is applied where text leaves, so no field is missed:
//
//   - every tool answer is rewritten once encoded ([Server.encode]): each string of the JSON
//     decodes to [agenttext.Escape] of what it held, so a client that decodes the answer
//     (structured content or its text) and shows a string shows the escape, not the character;
//   - a tool error's text is escaped by [Server.scrub].
//
// Resource reads are the exact bytes (a patch to apply, an output to save), as `agora
// dispatch patch` and the stored blob are: docs/mcp.md says so.

// escapeHiddenJSON returns b, JSON as encoding/json writes it, with each character
// [agenttext.Hidden] reports inside its strings written so that the string decodes to its
// [agenttext.Escape] form: U+202E becomes the six characters \u202e (a JSON \\u202e), ESC
// (which encoding/json writes as the escape \u001b) the four characters \x1b, a carriage
// return \x0d. Newline and tab stay. JSON with nothing to rewrite is returned as it is. Only
// strings hold a backslash or a byte over 0x7e in encoding/json's output, so the bytes are
// scanned without tracking where strings begin.
func escapeHiddenJSON(b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\\':
			r, n := jsonEscape(b[i:])
			if hidden(r) {
				return escapeHiddenJSONFrom(b, i)
			}
			i += n
		case c >= 0x7f:
			r, n := utf8.DecodeRune(b[i:])
			if hidden(r) || r == utf8.RuneError && n <= 1 {
				return escapeHiddenJSONFrom(b, i)
			}
			i += n
		default:
			i++
		}
	}
	return b
}

func escapeHiddenJSONFrom(b []byte, start int) []byte {
	out := append(make([]byte, 0, len(b)+64), b[:start]...)
	for i := start; i < len(b); {
		var r rune
		var n int
		switch c := b[i]; {
		case c == '\\':
			r, n = jsonEscape(b[i:])
		case c >= 0x7f:
			r, n = utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				r = '\uFFFD' // encoding/json writes none; Escape's own replacement
			}
		default:
			out = append(out, c)
			i++
			continue
		}
		if hidden(r) {
			out = appendEscaped(out, r)
		} else if c := b[i]; c >= 0x7f {
			out = utf8.AppendRune(out, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// jsonEscape reads the JSON escape at the start of b (a backslash): the character it stands
// for and its length. An escape it does not know stands for nothing hidden.
func jsonEscape(b []byte) (rune, int) {
	if len(b) < 2 {
		return 0x20, len(b)
	}
	switch b[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'r':
		return '\r', 2
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return 0x20, min(len(b), 2)
		}
		// A surrogate pair stands for one character above U+FFFF (the tag characters are
		// there): read as two halves, neither hidden, it would decode to a hidden one. Only
		// JSON the server did not encode can hold a pair (encoding/json writes UTF-8).
		if utf16.IsSurrogate(r) && r < 0xdc00 && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok && 0xdc00 <= lo && lo < 0xe000 {
				return utf16.DecodeRune(r, lo), 12
			}
		}
		return r, 6
	}
	return 0x20, 2 // \" \\ \/ \n \t
}

// hex4 reads the four hexadecimal digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, h := range b[:4] {
		switch {
		case '0' <= h && h <= '9':
			r = r<<4 | rune(h-'0')
		case 'a' <= h && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case 'A' <= h && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendEscaped appends r as [agenttext.Escape] writes it, inside a JSON string: its
// backslash doubled.
func appendEscaped(out []byte, r rune) []byte {
	switch {
	case r < 0x20 || r == 0x7f:
		return fmt.Appendf(out, `\\x%02x`, r)
	case r > 0xffff:
		return fmt.Appendf(out, `\\U%08x`, r)
	}
	return fmt.Appendf(out, `\\u%04x`, r)
}

// hidden is [agenttext.Hidden], from a table for the characters below U+0800 (one and two
// UTF-8 bytes: Latin, Greek, Cyrillic, Hebrew, Arabic...), which text that is not ASCII is
// mostly made of; the table is built from agenttext.Hidden at the first use.
func hidden(r rune) bool {
	if r >= 0 && r < 0x800 {
		return hiddenBelow800()[r]
	}
	return agenttext.Hidden(r)
}

var hiddenBelow800 = sync.OnceValue(func() *[0x800]bool {
	var t [0x800]bool
	for r := range t {
		t[r] = agenttext.Hidden(rune(r))
	}
	return &t
})
