package logline

import (
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"\n\n \t\n", ""},
		{"one", "one"},
		{"one\ntwo\n", "two"},
		{"one\n  two  \r\n\n\n", "two"},
		{"partial line without newline", "partial line without newline"},
	} {
		if got := Last([]byte(tt.in)); got != tt.want {
			t.Errorf("Last(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzLastLine(f *testing.F) {
	f.Add([]byte("a\nb\n\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Last(b)
		if strings.ContainsAny(got, "\n") || got != strings.TrimSpace(got) {
			t.Fatalf("Last(%q) = %q: a line, trimmed", b, got)
		}
		if got != "" && !strings.Contains(string(b), got) {
			t.Fatalf("Last(%q) = %q, not in the input", b, got)
		}
	})
}
