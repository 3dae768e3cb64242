package web

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// FuzzJSONEscapeHidden: a JSON answer decodes to the same value once its hidden characters
// are escaped, and holds none of them raw.
func FuzzJSONEscapeHidden(f *testing.F) {
	for _, s := range []string{"plain", "invoice\u202efdp.exe", "\u2066x\u2069", "\u009b31m", "\x7f", "a\u2028b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := map[string]any{"k": s, "list": []string{s, "x"}}
		b, err := json.Marshal(in)
		if err != nil {
			return
		}
		out := jsonEscapeHidden(b)
		for i := 0; i < len(out); {
			r, n := utf8.DecodeRune(out[i:])
			if agenttext.Hidden(r) && r != '\n' && r != '\t' {
				t.Fatalf("%q keeps %U raw", out, r)
			}
			i += n
		}
		var back, want map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q does not decode: %v", out, err)
		}
		json.Unmarshal(b, &want)
		if jb, jw := mustJSON(back), mustJSON(want); jb != jw {
			t.Fatalf("decoded %s, want %s", jb, jw)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
