package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// noBracketByte draws any byte except '[' and ']'. A secret containing neither cannot straddle a
// Mask and the text beside it, so "the output contains no form" is a fair property to demand.
func noBracketByte() *rapid.Generator[byte] {
	return rapid.Byte().Filter(func(b byte) bool { return b != '[' && b != ']' })
}

func propertyForms(v []byte) map[string]string {
	return map[string]string{
		"raw":            string(v),
		"base64 std":     base64.StdEncoding.EncodeToString(v),
		"base64 std raw": base64.RawStdEncoding.EncodeToString(v),
		"base64 url":     base64.URLEncoding.EncodeToString(v),
		"base64 url raw": base64.RawURLEncoding.EncodeToString(v),
		"hex lower":      hex.EncodeToString(v),
		"hex upper":      strings.ToUpper(hex.EncodeToString(v)),
		"url query":      url.QueryEscape(string(v)),
		"url path":       url.PathEscape(string(v)),
	}
}

func TestRedactor_Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secrets := rapid.SliceOfN(rapid.SliceOfN(noBracketByte(), MinLen, 48), 1, 5).Draw(t, "secrets")
		for _, s := range secrets {
			for _, f := range propertyForms(s) {
				if strings.Contains(Mask, f) {
					t.Skip("SKIP: a form of the secret is a substring of Mask itself")
				}
			}
		}
		r := New(secrets)

		var in bytes.Buffer
		parts := rapid.IntRange(1, 8).Draw(t, "parts")
		inserted := false
		for range parts {
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 0:
				in.Write(rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "text"))
			case 1:
				s := secrets[rapid.IntRange(0, len(secrets)-1).Draw(t, "which")]
				fs := propertyForms(s)
				names := []string{"raw", "base64 std", "base64 std raw", "base64 url", "base64 url raw",
					"hex lower", "hex upper", "url query", "url path"}
				in.WriteString(fs[rapid.SampledFrom(names).Draw(t, "form")])
				inserted = true
			case 2:
				s := secrets[rapid.IntRange(0, len(secrets)-1).Draw(t, "which")]
				pre := rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "blobPrefix")
				post := rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "blobSuffix")
				in.WriteString(base64.StdEncoding.EncodeToString(append(append(pre, s...), post...)))
				inserted = true
			}
		}
		out := r.Bytes(in.Bytes())
		for i, s := range secrets {
			for name, f := range propertyForms(s) {
				if bytes.Contains(out, []byte(f)) {
					t.Fatalf("secret %d: output contains its %s form %q\ninput:  %q\noutput: %q", i, name, f, in.Bytes(), out)
				}
			}
		}
		if inserted && !bytes.Contains(out, []byte(Mask)) {
			t.Fatalf("a secret was inserted but nothing was masked: %q", out)
		}

		chunk := rapid.IntRange(1, 64).Draw(t, "chunk")
		var buf bytes.Buffer
		w := r.Writer(&buf)
		for b := in.Bytes(); len(b) > 0; {
			n := min(chunk, len(b))
			w.Write(b[:n])
			b = b[n:]
		}
		w.Close()
		if !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("streamed in chunks of %d: got %q, want %q", chunk, buf.Bytes(), out)
		}
	})
}
