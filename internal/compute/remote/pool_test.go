package remote

import (
	"strings"
	"testing"
)

func TestParseEnrollAnswer(t *testing.T) {
	good := `{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop"}`
	if a, err := ParseEnrollAnswer([]byte(good)); err != nil || a.Slot != "s0123456789abcdef0123456789abcdef" {
		t.Fatalf("ParseEnrollAnswer(good) = %+v, %v", a, err)
	}
	for _, bad := range []string{
		`{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop","dispatch":"x"}`, // unknown field
		`{"slot":"S0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop"}`,                // not a slot id
		`{"slot":"s0123456789abcdef0123456789abcdef","token":"eyJ0123456789abcdefghijklmnop"}`,                 // not a gateway token
		`{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_` + strings.Repeat("a", 130) + `"}`,          // too long
		good + good, // two values
		`null`, ``,
	} {
		if _, err := ParseEnrollAnswer([]byte(bad)); err == nil {
			t.Errorf("ParseEnrollAnswer(%q) accepted", bad)
		}
	}
}

func TestValidPodUID(t *testing.T) {
	for s, want := range map[string]bool{
		"0f3c2a9e-1b2d-4c5e-8f70-123456789abc":  true,
		"0F3C2A9E-1B2D-4C5E-8F70-123456789ABC":  false,
		"../../../../etc/passwd-aaaaaaaaaaaaaa": false,
		"0f3c2a9e-1b2d-4c5e-8f70-123456789ab":   false,
		"0f3c2a9e11b2d-4c5e-8f70-123456789abc":  false,
	} {
		if got := ValidPodUID(s); got != want {
			t.Errorf("ValidPodUID(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzParseEnrollAnswer(f *testing.F) {
	f.Add([]byte(`{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseEnrollAnswer(b)
		if err != nil {
			return
		}
		if !ValidSlotID(a.Slot) || !strings.HasPrefix(a.Token, "agw_") || len(a.Token) > 128 {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func FuzzValidPodUID(f *testing.F) {
	f.Add("0f3c2a9e-1b2d-4c5e-8f70-123456789abc")
	f.Fuzz(func(t *testing.T, s string) {
		if ValidPodUID(s) && (len(s) != 36 || strings.ContainsAny(s, "/.\x00")) {
			t.Fatalf("accepted %q", s)
		}
	})
}
