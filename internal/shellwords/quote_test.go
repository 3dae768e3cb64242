package shellwords_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/shellwords"
)

// FuzzQuote: words made with Quote read back, through Split, as exactly those words, and a
// word a shell would not change is left as it is.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"plain", "fan[a]", "it's", "$(x)", "a b", "", "-x", "x;y", "`id`", "~", "é", "l\nm"} {
		f.Add(s, "t.fix-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a+b, 0) {
			t.Skip() // no shell word holds a NUL
		}
		line := "agora " + shellwords.Quote(a) + " " + shellwords.Quote(b)
		got, err := shellwords.Split(line)
		if err != nil {
			t.Fatalf("Quote(%q), Quote(%q): %q is not one simple command: %v", a, b, line, err)
		}
		if want := []string{"agora", a, b}; !slices.Equal(got, want) {
			t.Fatalf("%q reads as %q, want %q", line, got, want)
		}
	})
}

func TestQuote_PlainWordsStayPlain(t *testing.T) {
	for w, want := range map[string]string{"build": "build", "r-01J9.fix-2": "r-01J9.fix-2", "agora/x": "agora/x", "fan[a]": "'fan[a]'", "it's": `'it'\''s'`, "": "''", "=ls": "'=ls'", "%1": "'%1'"} {
		if got := shellwords.Quote(w); got != want {
			t.Errorf("Quote(%q) = %q, want %q", w, got, want)
		}
	}
}
