package words

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      string
	}{
		{name: "plain", in: "make test", want: []string{"make", "test"}},
		{name: "spaces", in: "  go   test\t./... ", want: []string{"go", "test", "./..."}},
		{name: "single quotes keep everything", in: `sh -c 'echo "$HOME" \n'`, want: []string{"sh", "-c", `echo "$HOME" \n`}},
		{name: "double quotes", in: `sh -c "make fix > \"out\""`, want: []string{"sh", "-c", `make fix > "out"`}},
		{name: "backslash", in: `a\ b c`, want: []string{"a b", "c"}},
		{name: "adjacent parts join", in: `a'b'"c"`, want: []string{"abc"}},
		{name: "empty quotes are a word", in: `x ''`, want: []string{"x", ""}},
		{name: "no expansion", in: `echo $HOME ~ *`, want: []string{"echo", "$HOME", "~", "*"}},
		{name: "unterminated single", in: `echo 'x`, err: "unterminated single quote"},
		{name: "unterminated double", in: `echo "x`, err: "unterminated double quote"},
		{name: "trailing backslash", in: `echo \`, err: "trailing backslash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// FuzzSplitWords: never panics, and words without quotes, backslashes or blanks survive a
// round trip through single quoting.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"make test", `sh -c 'a b'`, `"x\"y"`, `a\ b`, `'`, `"`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		var quoted []string
		for _, w := range words {
			if strings.Contains(w, "'") {
				return
			}
			quoted = append(quoted, "'"+w+"'")
		}
		again, err := Split(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("round trip of %q: got %q, %v; want %q", s, again, err, words)
		}
	})
}
