package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/agenttext"
)

// TestRedTeam37_EscapeHiddenJSONSurrogatePairs: escapeHiddenJSON read each \uXXXX escape on
// its own, so a character above U+FFFF written as a surrogate pair (\udb40\udc01 is the tag
// character U+E0001, \udb40\udc41 the tag A that spells ASCII invisibly, \ud834\udd73 a
// musical format control) passed as two halves that are not hidden, and decoded to the hidden
// character. encoding/json never writes a pair (it writes such a character as its UTF-8), so
// only JSON the server did not encode could carry one (a json.RawMessage in an answer, which
// none has today); the pair is now read as the character it stands for, and escaped. A pair
// of a visible character (an emoji) and a lone half stay as written.
func TestRedTeam37_EscapeHiddenJSONSurrogatePairs(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"tag\udb40\udc01x"}`:         "tag" + agenttext.Escape("\U000E0001") + "x",
		`{"a":"\uDB40\uDC41\uDB40\uDC7F"}`: agenttext.Escape("\U000E0041\U000E007F"),
		`{"a":"m\ud834\udd73"}`:            "m" + agenttext.Escape("\U0001D173"),
		`{"a":"emoji \ud83d\ude00"}`:       "emoji \U0001F600",
		`{"a":"lone \ud83d x"}`:            "lone \uFFFD x",
		`{"a":"low \ude00\ud83d"}`:         "low \uFFFD\uFFFD",
	} {
		var got map[string]string
		out := escapeHiddenJSON([]byte(in))
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: rewritten %s is not JSON: %v", in, out, err)
		}
		if got["a"] != want {
			t.Errorf("%s: decodes to %q, want %q", in, got["a"], want)
		}
		for _, r := range got["a"] {
			if agenttext.Hidden(r) {
				t.Errorf("%s: decodes to %q, which holds %U", in, got["a"], r)
			}
		}
	}
}
