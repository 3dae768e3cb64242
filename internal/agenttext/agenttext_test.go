package agenttext

import (
	"testing"
	"unicode/utf8"
)

// An agent's text reaches a person's terminal and browser: no escape sequence and no
// character that reorders or hides text may pass through.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"Which section?\nAdded or Fixed":   "Which section?\nAdded or Fixed",
		"\x1b]52;c;ZXZpbA==\x07 clipboard": `\x1b]52;c;ZXZpbA==\x07 clipboard`,
		"\x1b[2J\x1b[Hcleared":             `\x1b[2J\x1b[Hcleared`,
		"carriage\rreturn":                 `carriage\x0dreturn`,
		"c1 \u009b31m":                     `c1 \u009b31m`,
		"bidi \u202eevil":                  `bidi \u202eevil`,
		"invoice\u202efdp.exe":             `invoice\u202efdp.exe`,
		"isolates \u2066a\u2069 \u2067b":   `isolates \u2066a\u2069 \u2067b`,
		"marks \u200e\u200f\u061c":         `marks \u200e\u200f\u061c`,
		"lines \u2028\u2029":               `lines \u2028\u2029`,
		"del \x7f nul \x00":                `del \x7f nul \x00`,
		"bad utf8 \xff":                    "bad utf8 \uFFFD",
		"tab\tkept, ünïcödé kept, 日本":      "tab\tkept, ünïcödé kept, 日本",
		"":                                 "",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzEscape: what Escape returns is valid UTF-8 with no hidden character, and text with
// nothing hidden comes back unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"plain", "a\u202eb", "\x1b[31m", "\xff\xfe", "x\u2028y", "\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if Hidden(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, got, r)
			}
		}
		plain := utf8.ValidString(s)
		for _, r := range s {
			plain = plain && !Hidden(r)
		}
		if plain && got != s {
			t.Fatalf("Escape(%q) = %q changed text with nothing to escape", s, got)
		}
	})
}
