package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/agenttext"
)

// FuzzEscapeHiddenJSON: whatever a string holds, its JSON encoding rewritten by
// escapeHiddenJSON is still JSON and decodes to agenttext.Escape of what it encoded, as a value and
// as an object's key (an outputs' name, a refused host); text with nothing hidden is left
// byte for byte as encoding/json wrote it.
func FuzzEscapeHiddenJSON(f *testing.F) {
	for _, s := range []string{"plain", "a\u202eb", "\x1b[31m", "\xff\xfe", "x\u2028y", "\u0085", "\u009b", "cr\r\nlf\ttab",
		`back\slash "quote" <tag> &amp;`, "\U000e0041tag", "zero\u200bwidth", "\x7f", "\\u202e already"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := json.Marshal(map[string]any{s: []string{s, "ok"}})
		if err != nil {
			t.Fatal(err)
		}
		out := escapeHiddenJSON(in)
		var got map[string][]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: rewritten %s is not JSON: %v", s, out, err)
		}
		// encoding/json writes each byte that is not UTF-8 as U+FFFD; Escape of what it wrote.
		var plain string
		b, _ := json.Marshal(s)
		if err := json.Unmarshal(b, &plain); err != nil {
			t.Fatal(err)
		}
		want := agenttext.Escape(plain)
		if v, ok := got[want]; !ok || len(got) != 1 || len(v) != 2 || v[0] != want || v[1] != "ok" {
			t.Fatalf("%q: decodes to %q, want key and value %q", s, got, want)
		}
		if want == plain && string(out) != string(in) {
			t.Fatalf("%q: nothing hidden, yet rewritten %s to %s", s, in, out)
		}
	})
}

// BenchmarkEscapeHiddenJSON is what escaping adds to an answer: a describe of a dispatch with a
// 64 KiB patch inline, clean (the usual case: scanned, returned as it is) and with one hidden
// character in its last line (rewritten from there); marshal is encoding/json's encoding of the
// same answer, which encode did alone before, for scale.
func BenchmarkEscapeHiddenJSON(b *testing.B) {
	var patch []byte
	for len(patch) < maxPatchText {
		patch = append(patch, "+\tfmt.Println(\"héllo, wörld\") // a line of a patch, with \"quotes\" and <tags>\n"...)
	}
	for name, text := range map[string]string{"clean": string(patch), "hidden": string(patch) + "+\u202e\n"} {
		enc, err := json.Marshal(map[string]any{"results": map[string]any{"patch": map[string]any{"text": text}}})
		if err != nil {
			b.Fatal(err)
		}
		if name == "clean" {
			v := map[string]any{"results": map[string]any{"patch": map[string]any{"text": text}}}
			b.Run("marshal", func(b *testing.B) {
				b.SetBytes(int64(len(enc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := json.Marshal(v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				escapeHiddenJSON(enc)
			}
		})
	}
}
