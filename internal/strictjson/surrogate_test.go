package strictjson_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/strictjson"
)

// TestLoneSurrogates_KeysRefusedValuesReplaced pins a decision: a
// lone UTF-16 surrogate escape (\ud800 without its pair) is kept in a string value, read as
// U+FFFD, the one reading every agora process makes; it is not refused, because the agent
// CLIs' events carry model and tool text that JavaScript cut mid-pair (a truncated tool
// result, an emoji split), and refusing would fail a dispatch on benign output. In a key,
// where two readings could name two fields, distinct lone surrogates read the same and so
// are two equal keys: refused.
func TestLoneSurrogates_KeysRefusedValuesReplaced(t *testing.T) {
	var v struct {
		Text string `json:"text"`
	}
	if err := strictjson.Unmarshal([]byte(`{"text":"cut \ud83d here"}`), &v); err != nil {
		t.Fatalf("a lone surrogate in a value: %v", err)
	}
	if v.Text != "cut \uFFFD here" {
		t.Fatalf("a lone surrogate reads %q, want U+FFFD in its place", v.Text)
	}
	var pair struct {
		Text string `json:"text"`
	}
	if err := strictjson.Unmarshal([]byte(`{"text":"\ud83d\ude00"}`), &pair); err != nil || pair.Text != "😀" {
		t.Fatalf("a surrogate pair reads %q (%v), want 😀", pair.Text, err)
	}
	for _, doc := range []string{
		`{"\ud800":1,"\udbff":2}`, // both read U+FFFD
		`{"\ud800":1,"\ufffd":2}`,
		`{"\udc00x":1,"\ufffdx":2}`,
	} {
		if err := strictjson.Check([]byte(doc)); err == nil {
			t.Errorf("Check(%s) = nil: two keys that read the same", doc)
		}
	}
}
