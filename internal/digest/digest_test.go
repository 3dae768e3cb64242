package digest_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/digest"
)

func TestSum_Known(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2 example).
	const want = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := digest.Sum([]byte("abc")); got != want {
		t.Errorf("Sum(abc) = %s, want %s", got, want)
	}
	d := digest.Digest(want)
	if d.Hex() != want[7:] || d.Short() != "ba7816bf8f01" || d.String() != want {
		t.Errorf("Hex/Short/String = %q %q %q", d.Hex(), d.Short(), d.String())
	}
}

func TestParse(t *testing.T) {
	good := "sha256:" + strings.Repeat("0a", 32)
	tests := []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToUpper(good[:7]) + good[7:], false},
		{"sha256:" + strings.Repeat("0A", 32), false},
		{"sha256:" + strings.Repeat("0a", 31), false},
		{"sha256:" + strings.Repeat("0a", 33), false},
		{"sha256:" + strings.Repeat("zz", 32), false},
		{strings.Repeat("0a", 32), false},
		{"", false},
	}
	for _, tt := range tests {
		d, err := digest.Parse(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("Parse(%q) = %q, %v; want ok=%v", tt.in, d, err, tt.ok)
		}
		if err == nil && string(d) != tt.in {
			t.Errorf("Parse(%q) = %q", tt.in, d)
		}
	}
}
