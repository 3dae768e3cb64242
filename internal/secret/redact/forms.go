package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
)

// forms returns every encoding of v that a Redactor masks, each at least MinLen bytes long.
func forms(v []byte) []string {
	var out []string
	add := func(f string) {
		if len(f) >= MinLen {
			out = append(out, f)
		}
	}
	add(string(v))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		add(enc.EncodeToString(v))
		raw := enc.WithPadding(base64.NoPadding)
		add(raw.EncodeToString(v))
		for align := range 3 {
			add(base64Core(raw, v, align))
		}
	}
	lower := hex.EncodeToString(v)
	add(lower)
	add(strings.ToUpper(lower))
	add(url.QueryEscape(string(v)))
	add(url.PathEscape(string(v)))
	add(jsonEscape(v, true))
	add(jsonEscape(v, false))
	if q := cQuote(v); q != string(v) {
		add(q)
	}
	return out
}

// cQuote returns v as git writes a quoted path name (core.quotePath): the bytes of a
// non-ASCII character and control characters as three-digit octal escapes, ", \ and the
// common control characters with a backslash. A secret used as a file name reaches a patch in
// this form.
func cQuote(v []byte) string {
	var b strings.Builder
	for _, c := range v {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\a':
			b.WriteString(`\a`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\v':
			b.WriteString(`\v`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			b.WriteByte('\\')
			b.WriteByte('0' + c>>6)
			b.WriteByte('0' + (c>>3)&7)
			b.WriteByte('0' + c&7)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// base64Core returns the characters of the base64 encoding of v that depend on v alone when v
// starts align bytes into a 3-byte group of a longer encoded blob. Character j encodes bits
// [6j, 6j+6) of the blob; v holds bits [8·align, 8·(align+len(v))), so the characters wholly
// inside that range are the stable core. The bytes before v are zero here; they only affect the
// characters the core leaves out.
func base64Core(raw *base64.Encoding, v []byte, align int) string {
	enc := raw.EncodeToString(append(make([]byte, align), v...))
	first := (8*align + 5) / 6
	last := 8 * (align + len(v)) / 6
	return enc[first:last]
}

// jsonEscape returns v as the body of a JSON string, as encoding/json writes it.
func jsonEscape(v []byte, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(string(v)); err != nil {
		return "" // a Go string always encodes; "" is dropped as too short
	}
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}
