package web

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// What an agent wrote (its output, questions, file names, tool arguments) reaches a person
// escaped as the CLI prints it ([agenttext.Escape]): no bidirectional control may reorder it
// (invoice<U+202E>fdp.exe reading invoiceexe.pdf) and no control character may hide it.
// Escaping is applied where text leaves, so no field is missed:
//
//   - a page is escaped whole once rendered (pages.render): its own markup holds no such
//     character, so every one in it came from the data;
//   - text an event stream carries for the page to show is escaped before it is encoded;
//   - a JSON answer carries each such character as a JSON escape (jsonEscapeHidden): a
//     program decodes the same string, a person viewing the answer sees the escape.

// jsonEscapeHidden rewrites every character [agenttext.Hidden] reports in encoded JSON as a
// \uXXXX escape. encoding/json writes such characters raw only inside strings (it escapes
// C0 controls, U+2028 and U+2029 itself), so the document decodes to the same value.
func jsonEscapeHidden(b []byte) []byte {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if agenttext.Hidden(r) && r != '\n' && r != '\t' {
			return jsonEscapeFrom(b, i)
		}
		i += n
	}
	return b
}

func jsonEscapeFrom(b []byte, start int) []byte {
	out := append(make([]byte, 0, len(b)+32), b[:start]...)
	for i := start; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if agenttext.Hidden(r) && r != '\n' && r != '\t' {
			if r > 0xffff { // a JSON escape holds 16 bits: a surrogate pair
				hi, lo := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
