// Package agenttext makes text an agent or a model wrote safe to show a person: on a terminal
// (the CLI) and in a browser (the web run view). Control characters other than newline and
// tab, which could move a terminal's cursor, rewrite what is shown or reach the clipboard
// (ANSI and OSC sequences), and the characters that reorder or hide text (bidirectional
// overrides, isolates and marks, line and paragraph separators) and the characters drawn as
// nothing (zero-width characters, tag characters, variation selectors) are shown escaped as
// \xNN, \uNNNN or \UNNNNNNNN; invalid UTF-8 becomes U+FFFD. So `invoice<U+202E>fdp.exe` reads
// `invoice\u202efdp.exe`, never `invoiceexe.pdf`.
//
// It is a leaf: it imports only the standard library, holds no state and runs on either side
// of the sandbox.
package agenttext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character [Hidden] reports written as an escape: \xNN below
// U+0020 and for DEL, \UNNNNNNNN above U+FFFF, \uNNNN otherwise. Newline and tab are kept. Invalid UTF-8 becomes
// U+FFFD. Text with nothing to escape is returned as it is, without copying.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case !Hidden(r):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r > 0xffff:
			fmt.Fprintf(&b, "\\U%08x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// EscapeLine is Escape for text shown within one line: newline and tab are escaped too
// (\x0a, \x09), so the text can never begin a line of its own that reads as the program's.
func EscapeLine(s string) string {
	e := Escape(s)
	if !strings.ContainsAny(e, "\n\t") {
		return e
	}
	return strings.NewReplacer("\n", `\x0a`, "\t", `\x09`).Replace(e)
}

// Hidden reports whether r must not reach a person as it is: a control character other than
// newline and tab (C0, DEL, C1), a bidirectional control (U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069), a line or paragraph separator (U+2028, U+2029), a format
// character (Unicode class Cf: zero-width spaces and joiners, the BOM, soft hyphen, invisible
// operators, the tag characters U+E0000-U+E007F that spell ASCII invisibly), or another
// character drawn as nothing ([invisible]).
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	}
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) ||
		unicode.Is(unicode.Cf, r) || invisible(r)
}

// invisible reports the characters outside the format class (Cf) that are drawn as nothing
// or as a blank, and so can carry or pad text nobody sees, as the approval preview counts them
// (internal/modelgw/preview.go): the other default-ignorable code points (Hangul fillers, the
// combining grapheme joiner), the variation selectors but VS16 (U+FE0F, which asks for an
// emoji's colour form and is everywhere), and the Braille blank. A run of variation
// selectors after a visible character encodes any bytes.
func invisible(r rune) bool {
	switch {
	case r < 0x300 || r == 0xfe0f:
		return false
	case r == 0x2800:
		return true
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r)
}

// clean reports whether s is valid UTF-8 with nothing to escape. Plain ASCII text, the usual
// case, is decided a byte at a time.
func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if Hidden(rune(c)) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || Hidden(r) {
			return false
		}
		i += n
	}
	return true
}
