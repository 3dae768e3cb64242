package worker

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// FuzzUserPrompt: any input gives the input itself or, for a JSON object with a prompt,
// that prompt; never a panic.
func FuzzUserPrompt(f *testing.F) {
	for _, s := range []string{"", "{}", `{"prompt":"x"}`, `{"prompt":1}`, `{"prompt":"a","agora_resume":{"question":"q","answer":"a"}}`, `[`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		got := userPrompt(input)
		if input != "" && got != input && !json.Valid([]byte(input)) {
			t.Fatalf("userPrompt(%q) = %q from input that is not JSON", input, got)
		}
	})
}

// FuzzAuditFields: what the worker reports is always within the gateway's rules, so a
// hostile tool name or reason can never make a decision unreportable.
func FuzzAuditFields(f *testing.F) {
	for _, s := range []string{"read_file", "", "../x", "a\nb", "\xff", strings.Repeat("é", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name := agentrun.AuditToolName(s)
		if name == "" || len(name) > 128 || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
			t.Fatalf("auditToolName(%q) = %q", s, name)
		}
		for _, c := range []byte(name) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				t.Fatalf("auditToolName(%q) = %q", s, name)
			}
		}
		r := agentrun.OneLine(s, agentrun.MaxAuditReason)
		if len(r) > agentrun.MaxAuditReason || !utf8.ValidString(r) || strings.IndexFunc(r, unicode.IsControl) >= 0 {
			t.Fatalf("oneLine(%q) = %q", s, r)
		}
	})
}
