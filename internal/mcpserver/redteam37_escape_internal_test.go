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

// FuzzRedTeam37_EscapeHiddenRawJSON: FuzzEscapeHiddenJSON feeds escapeHiddenJSON only what
// encoding/json writes; this feeds it any JSON string, escapes as anyone may write them
// (upper-case hex, surrogate pairs and halves, \/, raw bytes that are not UTF-8): the result
// is JSON and decodes to agenttext.Escape of what the input decodes to.
func FuzzRedTeam37_EscapeHiddenRawJSON(f *testing.F) {
	for _, s := range []string{`plain`, `\u202E`, `\udb40\udc01`, `\uDB40\uDC41x`, `\ud83d\ude00`, `\ud83d`, `\ude00\ud83d`,
		`\ud83d\u0041`, `\/\b\f\n\r\t\\\"`, "\xff\xfe", `\u00ad\u061c`, "\u202e raw", `\\u202e as text`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := []byte(`{"k":"` + s + `"}`)
		var want map[string]string
		if json.Unmarshal(in, &want) != nil {
			return
		}
		out := escapeHiddenJSON(in)
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: rewritten %s is not JSON: %v", in, out, err)
		}
		if w := agenttext.Escape(want["k"]); got["k"] != w {
			t.Fatalf("%s: decodes to %q, want %q", in, got["k"], w)
		}
	})
}
