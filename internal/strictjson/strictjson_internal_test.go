package strictjson

import (
	"testing"
	"unicode/utf8"
)

// TestFoldKey_ASCIIFastPath: the ASCII shortcut folds every byte as the rune-by-rune fold does.
func TestFoldKey_ASCIIFastPath(t *testing.T) {
	for c := range utf8.RuneSelf {
		k := string(rune(c)) + "x"
		if got, want := foldKey(k), foldRunes(k); got != want {
			t.Errorf("foldKey(%q) = %q, foldRunes = %q", k, got, want)
		}
	}
	if foldKey("kind") != foldKey("\u212Aind") || foldKey("state") != foldKey("STATE") || foldKey("s") != foldKey("\u017F") {
		t.Error("keys equal under case folding fold apart")
	}
}
