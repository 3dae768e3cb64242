package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNeedsInput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    NeedsInput
		wantErr bool
	}{
		{"minimal", `{"question":"q"}`, NeedsInput{Question: "q"}, false},
		{"null partial state dropped", `{"question":"q","partial_state":null}`, NeedsInput{Question: "q"}, false},
		{"partial state compacted", `{"question":"q","partial_state":[1, 2]}`, NeedsInput{Question: "q", PartialState: json.RawMessage(`[1,2]`)}, false},
		{"blank question", `{"question":"  "}`, NeedsInput{}, true},
		{"option too long", `{"question":"q","options":["` + strings.Repeat("x", MaxOption+1) + `"]}`, NeedsInput{}, true},
		{"duplicate key", `{"question":"q","question":"r"}`, NeedsInput{}, true},
		{"trailing", `{"question":"q"}{}`, NeedsInput{}, true},
		{"invalid UTF-8", "{\"question\":\"\xff\"}", NeedsInput{}, true},
		{"not an object", `"q"`, NeedsInput{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNeedsInput([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
