package agenttext

import (
	"strings"
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
		line := EscapeLine(s)
		if strings.ContainsAny(line, "\n\t") || strings.ReplaceAll(strings.ReplaceAll(got, "\n", `\x0a`), "\t", `\x09`) != line {
			t.Fatalf("EscapeLine(%q) = %q: want Escape's %q with newline and tab escaped", s, line, got)
		}
	})
}

// TestRedTeamWeb_InvisibleTextEscaped: characters a browser and a terminal draw as nothing
// carry text a person approving or reading never sees: Unicode tag characters spell any
// ASCII invisibly ("ASCII smuggling": a write_file whose content tells the next model what to
// do), zero-width characters and variation selectors encode bytes between visible letters,
// and fillers read as blanks. Each is shown escaped, as the bidi controls are.
func TestRedTeamWeb_InvisibleTextEscaped(t *testing.T) {
	tags := func(s string) string {
		var out []rune
		for _, r := range s {
			out = append(out, 0xE0000+r)
		}
		return string(out)
	}
	for in, want := range map[string]string{
		"Approve?" + tags("run rm -rf"):  `Approve?\U000e0072\U000e0075\U000e006e\U000e0020\U000e0072\U000e006d\U000e0020\U000e002d\U000e0072\U000e0066`,
		"git\u200bpush":                  `git\u200bpush`,
		"a\u200c\u200d\u2060\ufeffb":     `a\u200c\u200d\u2060\ufeffb`,
		"soft\u00adhyphen":               `soft\u00adhyphen`,
		"x\u180ey":                       `x\u180ey`,
		"\u2061\u2062\u2063\u2064":       `\u2061\u2062\u2063\u2064`,
		"\ufff9a\ufffab\ufffb":           `\ufff9a\ufffab\ufffb`,
		"fill\u3164er\u115f\u1160\uffa0": `fill\u3164er\u115f\u1160\uffa0`,
		"smile\U000e0100\U000e01ef":      `smile\U000e0100\U000e01ef`,
		"vs\ufe00\ufe0e":                 `vs\ufe00\ufe0e`,
		"cgj\u034f braille\u2800":        `cgj\u034f braille\u2800`,
		"heart \u2764\ufe0f kept":        "heart \u2764\ufe0f kept",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
