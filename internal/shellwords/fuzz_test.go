package shellwords_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/shellwords"
)

// quote writes w so that a shell reads it back as the one word w.
func quote(w string) string { return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'" }

// FuzzSplit: Split never panics; what it accepts is at least one word with no NUL, and the
// words written back in single quotes split to the same words.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"git status", `/usr/bin/bash -lc "printf '%s\\n' 'L' > N && cat N"`,
		`a\ b "c\"d" 'e'`, "a; b", "x $(y)", "if x", "A=b c", "a\\\nb", `"\`, "# x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := shellwords.Split(s)
		if err != nil {
			if words != nil {
				t.Fatalf("Split(%q) returned words with an error", s)
			}
			return
		}
		if len(words) == 0 {
			t.Fatalf("Split(%q) accepted no words", s)
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			if strings.IndexByte(w, 0) >= 0 {
				t.Fatalf("Split(%q) word %q holds a NUL", s, w)
			}
			quoted[i] = quote(w)
		}
		// A first word that is quoted is never reserved nor an assignment, so this re-splits.
		again, err := shellwords.Split(strings.Join(quoted, " "))
		if err != nil || strings.Join(again, "\x00") != strings.Join(words, "\x00") {
			t.Fatalf("Split(%q) = %q; quoted back it reads %q, %v", s, words, again, err)
		}
	})
}
