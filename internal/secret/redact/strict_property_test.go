package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agora-dev/agora/internal/secret/redact/redacttest"
)

// Alphabets of the property test. Secrets avoid the letters of Mask (the oracle compares
// without case, so a secret holding "DACT" would be "read back" from every Mask), brackets,
// the escape starters and the filler's characters; the filler between encoded pieces has no
// base64, hex or escape character, so it can never decode to a piece of a secret by chance,
// and blob padding is bytes no secret holds.
const (
	secretAlphabet = "bfghijklmnopqsuvwxyzBFGHIJKLMNOPQSUVWXYZ0123456789-_+/=#$@`"
	fillerAlphabet = " \t\n,.;:!?()<>'|~^*{}\""
)

// encodings of a piece p of a secret, as a reflecting host might write it. Each takes random
// padding bytes (not in any secret) that share a blob with p, so base64 sees every alignment.
var propertyEncodings = map[string]func(p, pad []byte) string{
	"raw":          func(p, _ []byte) string { return string(p) },
	"lower":        func(p, _ []byte) string { return strings.ToLower(string(p)) },
	"upper":        func(p, _ []byte) string { return strings.ToUpper(string(p)) },
	"base64":       func(p, pad []byte) string { return base64.StdEncoding.EncodeToString(blob(pad, p)) },
	"base64url":    func(p, pad []byte) string { return base64.RawURLEncoding.EncodeToString(blob(pad, p)) },
	"hex":          func(p, _ []byte) string { return hex.EncodeToString(p) },
	"HEX":          func(p, _ []byte) string { return strings.ToUpper(hex.EncodeToString(p)) },
	"query":        func(p, _ []byte) string { return url.QueryEscape(string(p)) },
	"json":         func(p, _ []byte) string { b, _ := json.Marshal(string(p)); return string(b) },
	"percent":      func(p, _ []byte) string { return escapeEach(p, "%%%02X") },
	"\\u":          func(p, _ []byte) string { return escapeEach(p, `\u%04x`) },
	"\\x":          func(p, _ []byte) string { return escapeEach(p, `\x%02x`) },
	"octal":        func(p, _ []byte) string { return escapeEach(p, `\%03o`) },
	"entities":     func(p, _ []byte) string { return escapeEach(p, "&#%d;") },
	"basic base64": func(p, pad []byte) string { return base64.StdEncoding.EncodeToString(blob(pad, []byte(basicOf(p)))) },
	"basic hex":    func(p, _ []byte) string { return hex.EncodeToString([]byte(basicOf(p))) },
}

// wrappable encodings are those a host wraps in lines (escapes are not split by white space).
var wrappable = map[string]bool{"raw": true, "base64": true, "base64url": true, "hex": true, "HEX": true, "basic base64": true, "basic hex": true}

func blob(pad, p []byte) []byte {
	k := len(pad) / 2
	return append(append(append([]byte{}, pad[:k]...), p...), pad[k:]...)
}

func basicOf(p []byte) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+string(p)))
}

func escapeEach(p []byte, format string) string {
	var b strings.Builder
	for _, c := range p {
		fmt.Fprintf(&b, format, c)
	}
	return b.String()
}

// TestStrict_Property: for random secrets and random pieces of them (at least PieceLen bytes,
// any offset, the whole secret included) in random encodings, wrapped at random widths with
// random line breaks and indentation, between random filler, the masked output never lets
// redacttest read back a piece of PieceLen bytes of any secret, and streaming it in random
// chunks gives the same bytes as Bytes.
func TestStrict_Property(t *testing.T) {
	names := make([]string, 0, len(propertyEncodings))
	for n := range propertyEncodings {
		names = append(names, n)
	}
	rapid.Check(t, func(t *rapid.T) {
		secrets := rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom([]byte(secretAlphabet)), MinLen, 72), 1, 3).Draw(t, "secrets")
		r := NewStrict(secrets)
		var in bytes.Buffer
		parts := rapid.IntRange(1, 6).Draw(t, "parts")
		for range parts {
			in.WriteString(rapid.StringOfN(rapid.SampledFrom([]rune(fillerAlphabet)), 0, 12, -1).Draw(t, "filler"))
			s := secrets[rapid.IntRange(0, len(secrets)-1).Draw(t, "which")]
			n := rapid.IntRange(PieceLen(len(s)), len(s)).Draw(t, "pieceLen")
			at := rapid.IntRange(0, len(s)-n).Draw(t, "pieceAt")
			pad := rapid.SliceOfN(rapid.ByteRange(0x80, 0xff), 0, 6).Draw(t, "pad")
			name := rapid.SampledFrom(names).Draw(t, "encoding")
			enc := propertyEncodings[name](s[at:at+n], pad)
			if wrappable[name] && rapid.Bool().Draw(t, "wrap") {
				sep := rapid.SampledFrom([]string{"\n", "\r\n", " ", "\t", "\n  ", "\r\n        ", " \n"}).Draw(t, "sep")
				enc = redacttest.Wrap(enc, rapid.IntRange(1, 80).Draw(t, "width"), sep)
			}
			in.WriteString(enc)
		}
		out := r.Bytes(in.Bytes())
		for i, s := range secrets {
			if piece, how := redacttest.Leak(out, s, PieceLen(len(s))); piece != nil {
				t.Fatalf("secret %d (%q): %d bytes read back (%s): %q\n in: %q\nout: %q", i, s, len(piece), how, piece, in.Bytes(), out)
			}
		}
		chunk := rapid.IntRange(1, 97).Draw(t, "chunk")
		var buf bytes.Buffer
		w := r.Writer(&buf)
		for b := in.Bytes(); len(b) > 0; b = b[min(chunk, len(b)):] {
			w.Write(b[:min(chunk, len(b))])
		}
		w.Close()
		if !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("streamed in chunks of %d:\n got %q\nwant %q", chunk, buf.Bytes(), out)
		}
	})
}
