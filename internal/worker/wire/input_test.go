package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// sizedInput returns {"x":"yyy..."} of exactly n bytes in canonical JSON (n >= 8).
func sizedInput(n int) string {
	return `{"x":"` + strings.Repeat("y", n-len(`{"x":""}`)) + `"}`
}

func TestCanonicalInput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		tooBig  bool
		wantErr string
	}{
		{"empty is an empty object", "  ", "{}", false, ""},
		{"canonical form", `{ "b": 1, "a": [true, null] }`, `{"a":[true,null],"b":1}`, false, ""},
		{"exactly at the limit", sizedInput(MaxInputJSON), sizedInput(MaxInputJSON), false, ""},
		{"one byte over", sizedInput(MaxInputJSON + 1), "", true, "122881 bytes of canonical JSON"},
		// Whitespace does not count: the canonical form is what reaches the agent.
		{"padded but small", "{\"a\":1" + strings.Repeat(" ", MaxInputJSON) + "}", `{"a":1}`, false, ""},
		{"raw far over", `{"a":"` + strings.Repeat("y", maxRawInput) + `"}`, "", true, "the limit is 122880 bytes"},
		{"not an object", `[1]`, "", false, "must be a JSON object"},
		{"two values", `{}{}`, "", false, "more than one JSON value"},
		{"trailing garbage", `{}x`, "", false, "more than one JSON value"},
		{"fraction", `{"a":1.5}`, "", false, "input:"},
		{"invalid", `{"a":`, "", false, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalInput([]byte(tt.in))
			if tt.wantErr != "" || tt.tooBig {
				if err == nil {
					t.Fatalf("got %d bytes, want an error", len(got))
				}
				if errors.Is(err, ErrInputTooLarge) != tt.tooBig {
					t.Errorf("errors.Is(err, ErrInputTooLarge) = %v, want %v (%v)", !tt.tooBig, tt.tooBig, err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got error %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %.80s, want %.80s", got, tt.want)
			}
		})
	}
}

func FuzzCanonicalInput(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":[1,"x",{"b":null}]}`, `{"a":1e3}`, `[1]`, `{}{}`, `{"\u00e9":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := CanonicalInput(raw)
		if err != nil {
			return
		}
		if len(b) > MaxInputJSON {
			t.Fatalf("accepted %d bytes, over the limit", len(b))
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("canonical form %q does not read back as an object: %v", b, err)
		}
		again, err := CanonicalInput(b)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("canonical form is not stable: %q -> %q (%v)", b, again, err)
		}
	})
}
