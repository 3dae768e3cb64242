package agentproc

import (
	"testing"
	"unicode/utf8"
)

func TestWriter_KeepsTheLastBytes(t *testing.T) {
	w := &Writer{Max: 8}
	for _, s := range []string{"abc", "defgh", "ijklmnop", "q"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := w.String(); got != "jklmnopq" {
		t.Errorf("kept %q, want jklmnopq", got)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"error:\n  bad\tthing\r\n", 100, "error: bad thing"},
		{"bell\x07 and \x1b[31mcolour", 100, "bell and [31mcolour"},
		{"abcdef", 4, "cdef"},
		{"xé€", 4, "€"}, // the last 4 bytes start inside "é": the cut moves to the next rune
		{"\xff\xfeok", 10, "ok"},
	}
	for _, tt := range tests {
		got := OneLine(tt.in, tt.n)
		if got != tt.want || !utf8.ValidString(got) {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
