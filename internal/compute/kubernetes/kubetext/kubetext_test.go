package kubetext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// FuzzPrintable: whatever the kubelet says, the copy is valid UTF-8 without a control
// character and within its limit.
func FuzzPrintable(f *testing.F) {
	f.Add("401 Unauthorized\n\x1b[2J", 16)
	f.Add(strings.Repeat("é", 40), 7)
	f.Add("realm=\u202eexe.gdp\u2028x\u200b", 64)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 0 || limit > 4096 {
			return
		}
		out := Printable(s, limit)
		if !utf8.ValidString(out) || len(out) > limit+3 {
			t.Fatalf("Printable(%q, %d) = %q", s, limit, out)
		}
		for _, r := range out {
			if r < 0x20 || agenttext.Hidden(r) {
				t.Fatalf("Printable(%q) kept %U", s, r)
			}
		}
	})
}
