package modelgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a person is shown of a held call decides what they approve (canonical
// JSON cut at 2 KiB sorts "content" before "path", so a long harmless-looking write
// would show no path, no size, and a trailing "..." that reads as content). The preview is
// built so that a cut cannot hide what the call is about:
//
//   - the fields that say what a call touches (identifyingFields: path, argv, url, host,
//     method...) come first, then every other short field, then the long ones; a field that
//     fits is shown whole;
//   - the long fields share what is left of MaxApprovalPreview; a cut value ends with
//     "[… N more bytes not shown]", and a cut preview ends with the size of the whole
//     arguments and the command that prints them all;
//   - "…" (U+2026) in the arguments is shown escaped as \u2026, like every control, format
//     and invisible character, so the only literal "…" in a preview is a cut marker.
//
// The preview is still JSON text where nothing is cut; the escapes are JSON escapes.

// identifyingFields are the argument names that say what a call acts on, shown first in
// this order: agora's tools (path, argv, cwd, url, method), Claude Code's (file_path,
// notebook_path, command, pattern) and common names for a target.
var identifyingFields = []string{
	"path", "file_path", "notebook_path", "argv", "command", "cmd", "cwd", "workdir",
	"url", "host", "method", "pattern", "glob",
}

// identifying is key's place among identifyingFields, or -1. Case is ignored: a tool that
// decodes its arguments with encoding/json reads "Path" as its path, so "Path" must come
// first as "path" does (the strict check of the arguments refuses both in one call).
func identifying(key string) int {
	return slices.IndexFunc(identifyingFields, func(f string) bool { return strings.EqualFold(f, key) })
}

// shortField is the longest rendered field ("key":value) that counts as short: shown whole
// ahead of the long fields, as long as the preview has room.
const shortField = 256

// minCut is the least of a long field's value a preview shows before cutting it; a field
// that cannot get that much is left out and counted in the closing marker.
const minCut = 96

// field is one member of the arguments object, rendered for a person.
type field struct {
	key   string // rendered key, quoted
	val   string // rendered value
	str   bool   // the value is a string (a cut closes its quote)
	order int    // where it is shown
	shown int    // bytes of val shown from its start; len(val) when whole
	tail  int    // where the part of val shown at its end starts; len(val) when none
	omit  bool   // not shown at all
}

// renderPreview is what a person is shown of canon (the RFC 8785 form of an arguments
// object): the dispatch's secrets masked, characters a person cannot see escaped, the
// identifying fields first, cut to MaxApprovalPreview bytes with unmistakable markers.
// dispatchID and callID name the call in the hint to read it all.
func (g *Gateway) renderPreview(canon []byte, dispatchID, callID string) string {
	fields, err := g.previewFields(canon)
	if err != nil {
		// canon is an object's canonical form; this cannot happen. Show it escaped and cut.
		return clip(EscapeJSON(g.red.String(string(canon))), MaxApprovalPreview)
	}
	whole := 2 // the braces
	for _, f := range fields {
		whole += len(f.key) + 1 + len(f.val) + 1
	}
	if whole-1 <= MaxApprovalPreview {
		return joinFields(fields, "")
	}
	tail := fmt.Sprintf(" [… %s bytes of arguments in all; agora dispatch approval show %s %s prints them]",
		Thousands(len(canon)), dispatchID, callID)
	budget := MaxApprovalPreview - len(tail) - len("{}") - maxOmitMarker
	// The identifying fields first, whole if they fit at all; then the other short fields,
	// whole while there is room; the rest are long and share what is left.
	var long []*field
	for pass := 0; pass < 2; pass++ {
		for i := range fields {
			f := &fields[i]
			ident := f.order < len(identifyingFields)
			if ident != (pass == 0) {
				continue
			}
			n := len(f.key) + 1 + len(f.val) + 1
			switch {
			case (ident || n <= shortField) && n <= budget:
				budget -= n
			case !ident && n <= shortField:
				f.omit = true
			default:
				long = append(long, f)
			}
		}
	}
	// Water-filling: the long fields share what is left, the shortest first, so a field
	// that needs less than an equal share leaves the rest to the others.
	slices.SortStableFunc(long, func(a, b *field) int { return len(a.val) - len(b.val) })
	for i, f := range long {
		share := budget / (len(long) - i)
		overhead := len(f.key) + 1 + 1
		if n := overhead + len(f.val); n <= share {
			budget -= n
			continue
		}
		if f.order < len(identifyingFields) {
			// What a path or an argv ends with is what it acts on
			// (docs/x/x/.../../../.githooks/post-checkout, git -c <long> push REMOTE):
			// a cut identifying field shows its start and its end.
			room := share - overhead - len(midMarker(len(f.val))) - 2
			if room < minCut {
				f.omit = true
				continue
			}
			f.shown = cutPoint(f.val, room/2)
			f.tail = tailPoint(f.val, room-f.shown)
			budget -= overhead + f.shown + 2 + len(midMarker(f.tail-f.shown)) + len(f.val) - f.tail
			continue
		}
		room := share - overhead - len(cutMarker(len(f.val))) - 1 // the marker's longest
		if room < minCut {
			f.omit = true
			continue
		}
		f.shown = cutPoint(f.val, room)
		budget -= overhead + f.shown + 1 + len(cutMarker(len(f.val)-f.shown))
	}
	return joinFields(fields, tail)
}

// maxOmitMarker bounds the marker that counts the fields left out.
const maxOmitMarker = len("[… 1000000 more fields (1,000,000,000 bytes) not shown],")

// previewFields splits canon into its members, rendered, in the order a person reads them:
// the identifying fields, the other short fields, the long ones.
func (g *Gateway) previewFields(canon []byte) ([]field, error) {
	members, err := orderedMembers(canon)
	if err != nil {
		return nil, err
	}
	fields := make([]field, 0, len(members))
	for _, m := range members {
		kb, _ := json.Marshal(m.key)
		f := field{
			key: EscapeJSON(g.red.String(string(kb))),
			val: EscapeJSON(g.red.String(string(m.raw))),
			str: len(m.raw) > 0 && m.raw[0] == '"',
		}
		f.shown, f.tail = len(f.val), len(f.val)
		switch i := identifying(m.key); {
		case i >= 0:
			f.order = i
			f.val = escapeSpaceRuns(f.val)
			f.shown, f.tail = len(f.val), len(f.val)
		case len(f.key)+1+len(f.val) <= shortField:
			f.order = len(identifyingFields)
		default:
			f.order = len(identifyingFields) + 1
		}
		fields = append(fields, f)
	}
	slices.SortStableFunc(fields, func(a, b field) int { return a.order - b.order })
	return fields, nil
}

// joinFields writes the fields as an object, each whole, cut or left out, then tail when
// anything was cut or left out.
func joinFields(fields []field, tail string) string {
	var b strings.Builder
	b.WriteByte('{')
	cut, omitted, omittedBytes := false, 0, 0
	sep := ""
	for _, f := range fields {
		if f.omit {
			omitted++
			omittedBytes += len(f.key) + 1 + len(f.val)
			continue
		}
		b.WriteString(sep)
		sep = ","
		b.WriteString(f.key)
		b.WriteByte(':')
		if f.shown == len(f.val) {
			b.WriteString(f.val)
			continue
		}
		cut = true
		b.WriteString(f.val[:f.shown])
		if f.str {
			b.WriteByte('"')
		}
		if f.tail < len(f.val) {
			b.WriteString(midMarker(f.tail - f.shown))
			if f.str {
				b.WriteByte('"')
			}
			b.WriteString(f.val[f.tail:])
			continue
		}
		b.WriteString(cutMarker(len(f.val) - f.shown))
	}
	if omitted > 0 {
		cut = true
		b.WriteString(sep)
		fmt.Fprintf(&b, "[… %d more fields (%s bytes) not shown]", omitted, Thousands(omittedBytes))
	}
	b.WriteByte('}')
	if cut {
		b.WriteString(tail)
	}
	return b.String()
}

// cutMarker ends a cut value: n bytes of its rendered form are not shown.
func cutMarker(n int) string {
	return "[… " + Thousands(n) + " more bytes not shown]"
}

// midMarker stands for n bytes cut out of the middle of a value, whose end follows it.
func midMarker(n int) string {
	return "[… " + Thousands(n) + " bytes not shown; the end follows]"
}

// tailPoint is where the longest suffix of s, at most n bytes, starts without splitting a
// rune or an escape sequence.
func tailPoint(s string, n int) int {
	for i := 0; i < len(s); {
		if len(s)-i <= n {
			return i
		}
		size := 0
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == 'u':
			size = 6
		case s[i] == '\\':
			size = 2
		default:
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
	}
	return len(s)
}

// cutPoint is the longest prefix of s, at most n bytes, that does not split a rune or an
// escape sequence (\uXXXX, \n, \", ...).
func cutPoint(s string, n int) int {
	last := 0
	for i := 0; i < len(s); {
		size := 0
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == 'u':
			size = 6
		case s[i] == '\\':
			size = 2
		default:
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		if i+size > n {
			break
		}
		i += size
		last = i
	}
	return min(last, len(s))
}

// Thousands writes n with a comma between groups of three digits: 2,391.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// EscapeJSON returns JSON text s with every character a person cannot see, or that could
// move or reorder what a terminal or a browser shows (control, format and bidirectional
// characters, line and paragraph separators, unassigned and private-use code points, invalid
// UTF-8), written as a \uXXXX escape (a surrogate pair above U+FFFF), and "…" (U+2026) too,
// which a preview keeps for its cut markers. Inside a JSON string this is the same string;
// s must hold such characters only inside strings, as valid JSON does.
func EscapeJSON(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				b.WriteString(`\ufffd`) // invalid UTF-8: shown as the replacement character
				continue
			}
		}
		if visible(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff {
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// visible reports whether r may be shown as itself.
func visible(r rune) bool {
	switch {
	case r == ' ':
		return true
	case r == '…' || r == utf8.RuneError:
		return false
	case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Bidi_Control, r),
		unicode.Is(unicode.Co, r), r == '\u2028' || r == '\u2029':
		return false
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r),
		r == '\u2800':
		// Printable to Go, drawn as nothing or as blank space: the Hangul fillers, the
		// combining grapheme joiner, variation selectors, Braille blank. A run of them pads
		// a command so that its end sits screens below its start.
		return false
	}
	return unicode.IsPrint(r)
}

// escapeSpaceRuns writes every space that follows a space as \u0020. It is applied to
// the identifying fields (a path, a command, a URL), which rarely hold two spaces in a row:
// a run of them could push the end of a command out of sight behind a forged cut marker.
// s is JSON text, where spaces occur only inside strings.
func escapeSpaceRuns(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 32)
	prev := byte(0)
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && prev == ' ' {
			b.WriteString(`\u0020`)
		} else {
			b.WriteByte(s[i])
		}
		prev = s[i]
	}
	return b.String()
}

// utf16Pair is the surrogate pair of r, a code point above U+FFFF.
func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// FormatArgs renders a held call's whole arguments (masked canonical JSON, as
// [ApprovalRequest.Args] has them) for a person to read before deciding: one line per field,
// the identifying fields first, each value as escaped JSON ([EscapeJSON]); a string with
// line breaks is shown as a block, one "  | " line per line of it, so no line of content
// can pass for a field, escaped the same way (tabs kept), with a note when it does not end
// in a line break. Arguments that are not a JSON object (masking can break one) are shown
// as escaped text.
func FormatArgs(args string) string {
	fields, err := orderedMembers([]byte(args))
	if err != nil {
		return EscapeJSON(args) + "\n"
	}
	var b strings.Builder
	for _, m := range fields {
		key := m.key
		if !bareKey(key) {
			kb, _ := json.Marshal(key)
			key = EscapeJSON(string(kb))
		}
		ident := identifying(m.key) >= 0
		var s string
		if json.Unmarshal(m.raw, &s) != nil || !strings.Contains(s, "\n") {
			v := EscapeJSON(string(m.raw))
			if ident {
				v = escapeSpaceRuns(v)
			}
			fmt.Fprintf(&b, "%s: %s\n", key, v)
			continue
		}
		lines := strings.Split(s, "\n")
		last := lines[len(lines)-1]
		if last == "" {
			lines = lines[:len(lines)-1]
		}
		fmt.Fprintf(&b, "%s: %s bytes, %d lines\n", key, Thousands(len(s)), len(lines))
		for _, l := range lines {
			b.WriteString("  | ")
			prev := rune(0)
			for _, r := range l {
				switch {
				case ident && r == ' ' && prev == ' ':
					b.WriteString(`\u0020`)
				case r == '\t' || visible(r):
					b.WriteRune(r)
				case r > 0xffff:
					r1, r2 := utf16Pair(r)
					fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				default:
					fmt.Fprintf(&b, `\u%04x`, r)
				}
				prev = r
			}
			b.WriteByte('\n')
		}
		if last != "" {
			b.WriteString("  (no line break at the end)\n")
		}
	}
	return b.String()
}

// member is one key and raw value of an object.
type member struct {
	key string
	raw json.RawMessage
}

// orderedMembers splits a JSON object into its members, the identifying fields first (in
// identifyingFields' order), the others in the order given.
func orderedMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	rank := func(k string) int {
		if i := identifying(k); i >= 0 {
			return i
		}
		return len(identifyingFields)
	}
	slices.SortStableFunc(out, func(a, b member) int { return rank(a.key) - rank(b.key) })
	return out, nil
}

// bareKey reports whether key can be shown unquoted: letters, digits, '_', '-' and '.'.
func bareKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
