package claudeadapter

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/shellwords"
	"github.com/agora-dev/agora/internal/strictjson"
)

func TestParseHookInput(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		want              hookInput
	}{
		{
			name: "Pre",
			in:   hookEvent("PreToolUse", "Bash", "toolu_1", ` {"command":"ls"}`, `"future_field":[1]`),
			want: hookInput{Event: "PreToolUse", Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`), CallID: "toolu_1", DurationMS: -1},
		},
		{
			name: "PostFailure",
			in:   hookEvent("PostToolUseFailure", "Bash", "toolu_1", `{}`, `"error":"x"`, `"is_interrupt":true`, `"duration_ms":12.5`),
			want: hookInput{Event: "PostToolUseFailure", Tool: "Bash", Input: json.RawMessage(`{}`), CallID: "toolu_1", DurationMS: 12, Interrupt: true},
		},
		{name: "NotAToolEvent", in: hookEvent("Stop", "Bash", "t", `{}`), wantErr: "hook_event_name: not a tool event"},
		{name: "EventCase", in: strings.Replace(hookEvent("PreToolUse", "Bash", "t", `{}`), `"hook_event_name"`, `"Hook_Event_Name"`, 1), wantErr: "hook_event_name: want a string"},
		{name: "DuplicateKey", in: strings.TrimSuffix(hookEvent("PreToolUse", "Bash", "t", `{}`), "}") + `,"tool_name":"Read"}`, wantErr: "hook input"},
		{name: "FoldedDuplicateKey", in: strings.TrimSuffix(hookEvent("PreToolUse", "Bash", "t", `{}`), "}") + `,"TOOL_NAME":"Read"}`, wantErr: "hook input"},
		{name: "NoTool", in: `{"hook_event_name":"PreToolUse","tool_use_id":"t","tool_input":{}}`, wantErr: "tool_name: want a string"},
		{name: "EmptyID", in: hookEvent("PreToolUse", "Bash", "", `{}`), wantErr: "tool_use_id: want a string"},
		{name: "LongTool", in: hookEvent("PreToolUse", strings.Repeat("a", 257), "t", `{}`), wantErr: "tool_name: want a string of 1 to 256 bytes"},
		{name: "InputNotAnObject", in: hookEvent("PreToolUse", "Bash", "t", `"ls"`), wantErr: "tool_input: want a JSON object"},
		{name: "NoInput", in: `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t"}`, wantErr: "tool_input: want a JSON object"},
		{name: "NegativeDuration", in: hookEvent("PostToolUse", "Bash", "t", `{}`, `"duration_ms":-1`), wantErr: "duration_ms"},
		{name: "InterruptString", in: hookEvent("PostToolUseFailure", "Bash", "t", `{}`, `"is_interrupt":"yes"`), wantErr: "is_interrupt"},
		{name: "InvalidUTF8", in: "{\"hook_event_name\":\"PreToolUse\xff\"}", wantErr: "not valid UTF-8"},
		{name: "Array", in: `[]`, wantErr: "not a JSON object"},
		{name: "Trailing", in: hookEvent("PreToolUse", "Bash", "t", `{}`) + "{}", wantErr: "hook input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHookInput([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Event != tc.want.Event || got.Tool != tc.want.Tool || string(got.Input) != string(tc.want.Input) ||
				got.CallID != tc.want.CallID || got.DurationMS != tc.want.DurationMS || got.Interrupt != tc.want.Interrupt {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := parseHookInput(make([]byte, maxHookInput+1)); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("an input over the cap: got %v", err)
	}
}

// FuzzParseHookInput: whatever claude (or anything in the sandbox that runs the hook) puts
// on stdin, an accepted input is a tool event with a bounded name and id, an object input
// and a sane duration, and the error never repeats the input.
func FuzzParseHookInput(f *testing.F) {
	for _, s := range []string{
		hookEvent("PreToolUse", "Bash", "toolu_1", `{"command":"ls"}`),
		hookEvent("PostToolUse", "mcp__a__b", "toolu_1", `{}`, `"tool_response":{"x":[1,2]}`, `"duration_ms":3`),
		hookEvent("PostToolUseFailure", "Bash", "toolu_1", `{}`, `"is_interrupt":false`, `"error":"e"`),
		`{}`, `[`, `{"hook_event_name":null}`, `{"tool_input":{"a":{"a":{"a":1}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseHookInput(b)
		if err != nil {
			if len(b) > 16 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("the error repeats the input: %v", err)
			}
			return
		}
		if !slices.Contains(claudert.HookEvents, in.Event) || in.Tool == "" || len(in.Tool) > maxHookField ||
			in.CallID == "" || len(in.CallID) > maxHookField || !json.Valid(in.Input) || in.Input[0] != '{' ||
			in.DurationMS < -1 || in.DurationMS > maxDurationMS {
			t.Fatalf("accepted %+v", in)
		}
	})
}

// FuzzHookBash: whatever a Bash call's tool_input holds, the hook reads its command line
// exactly as claude would (the one member named "command", a string) or refuses it, and the
// line it lets through is one the grant allows: one simple command a pattern names, or any
// line when a pattern names the shell.
func FuzzHookBash(f *testing.F) {
	for _, s := range []string{
		`{"command":"git status"}`, `{"command":"git status; id"}`, `{"Command":"ls"}`,
		`{"command":"ls","command":"id"}`, `{"command":"git \"status\"","description":"x"}`,
		`{"command":"git status","COMMAND":"id"}`, `{"command":1}`, `{"command":"git 'status'\n"}`,
	} {
		f.Add([]byte(s), "git status")
		f.Add([]byte(s), "bash -c *")
	}
	f.Fuzz(func(t *testing.T, input []byte, pattern string) {
		line, err := bashCommand(input)
		if err != nil {
			return
		}
		var m map[string]any
		if strictjson.CheckObject(input) != nil || json.Unmarshal(input, &m) != nil || m["command"] != line {
			t.Fatalf("bashCommand(%q) = %q, which is not the input's one \"command\" string", input, line)
		}
		patterns := []string{pattern}
		ok, why := grant.CommandLineAllowed(patterns, line)
		if !ok {
			if why == "" {
				t.Fatalf("%q refused without a reason", line)
			}
			return
		}
		words, serr := shellwords.Split(line)
		simple := serr == nil && grant.CommandAllowed(patterns, words)
		shell := grant.CommandAllowed(patterns, []string{"bash", "-c", line}) ||
			grant.CommandAllowed(patterns, []string{"bash", "-lc", line}) || grant.CommandAllowed(patterns, []string{"sh", "-c", line})
		if !simple && !shell {
			t.Fatalf("%q allowed under %q: it is neither one simple command the pattern names nor a line under a granted shell", line, pattern)
		}
	})
}
