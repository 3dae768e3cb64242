package codexrt

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

type recorder struct{ started, completed []Item }

func (r *recorder) Started(it Item)   { r.started = append(r.started, it) }
func (r *recorder) Completed(it Item) { r.completed = append(r.completed, it) }

func TestParseStreamTurn(t *testing.T) {
	b, err := os.ReadFile("testdata/turn.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var tr bytes.Buffer
	var obs recorder
	res, err := ParseStream(bytes.NewReader(b), &tr, &obs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Final != "Added hello.txt." || !res.Completed || res.Failed || res.ThreadID == "" {
		t.Errorf("got %+v, want the final message, a completed turn and the thread id", res)
	}
	want := Usage{InputTokens: 24763, CachedInputTokens: 24448, OutputTokens: 122, ReasoningOutputTokens: 64}
	if res.Usage != want {
		t.Errorf("got usage %+v, want %+v", res.Usage, want)
	}
	if tr.String() != string(b) {
		t.Errorf("the transcript is not the stream as it came")
	}
	if len(obs.started) != 1 || obs.started[0].Type != KindCommand || obs.started[0].Command != "/bin/bash -lc ls" || obs.started[0].ExitCode != nil {
		t.Errorf("got started %+v, want the command before it ran", obs.started)
	}
	if len(obs.completed) != 4 || obs.completed[0].ExitCode == nil || *obs.completed[0].ExitCode != 0 {
		t.Fatalf("got completed %+v, want 4 items, the command with exit code 0 first", obs.completed)
	}
	if fc := obs.completed[2]; fc.Type != KindFileChange || len(fc.Changes) != 1 || fc.Changes[0] != (Change{Path: "/work/repo/hello.txt", Kind: "add"}) {
		t.Errorf("got %+v, want the file change of hello.txt", fc)
	}
}

func TestParseStreamFailedTurn(t *testing.T) {
	in := `{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"error","message":"Connection failed: error sending request"}
{"type":"turn.failed","error":{"message":"stream closed before response.completed"}}
`
	res, err := ParseStream(strings.NewReader(in), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed || res.Completed || len(res.Errors) != 2 || res.Errors[1] != "stream closed before response.completed" {
		t.Errorf("got %+v, want a failed turn with both messages", res)
	}
}

func TestParseStreamMalformed(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"NotJSON":    {"{\"type\":\"turn.started\"}\nBOOM\n", "codex output line 2: not a JSON event"},
		"NoType":     {"{\"thread_id\":\"x\"}\n", `codex output line 1: event has no "type"`},
		"Array":      {"[1,2]\n", "codex output line 1: not a JSON event"},
		"ItemNoID":   {"{\"type\":\"item.started\",\"item\":{\"type\":\"command_execution\"}}\n", "item.started without an item id and type"},
		"ItemNull":   {"{\"type\":\"item.completed\",\"item\":null}\n", "item.completed without an item id and type"},
		"LineTooBig": {"{\"type\":\"x\",\"p\":\"" + strings.Repeat("a", maxLine) + "\"}\n", "codex output line 1: bufio.Scanner: token too long"},
		// A line that says two things (to a reader that folds case or keeps the
		// last duplicate, and to one that reads exactly) is refused, whichever key it doubles.
		"TypeAndType":       {`{"type":"item.started","Type":"turn.started","item":{"id":"1","type":"command_execution","command":"rm -rf /"}}` + "\n", `duplicate key "Type"`},
		"ItemAndItem":       {`{"type":"item.started","item":{"id":"1","type":"command_execution","command":"rm -rf /"},"Item":{"id":"1","type":"command_execution","command":"git status"}}` + "\n", `duplicate key "Item"`},
		"CommandAndCommand": {`{"type":"item.started","item":{"id":"1","type":"command_execution","command":"rm -rf /","Command":"git status"}}` + "\n", `duplicate key "Command"`},
		"LoneCaseVariant":   {`{"type":"item.started","item":{"id":"1","type":"command_execution","Command":"git status"}}` + "\n", `keys are case-sensitive: the field is "command"`},
		"SameKeyTwice":      {`{"type":"item.started","item":{"id":"1","id":"2","type":"command_execution","command":"x"}}` + "\n", `duplicate key "id"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := strings.NewReader(tc.in + "{\"type\":\"turn.completed\"}\n")
			_, err := ParseStream(r, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if r.Len() != 0 {
				t.Errorf("%d bytes left unread: codex would block on a full pipe", r.Len())
			}
		})
	}
}

func TestParseStreamNoTurn(t *testing.T) {
	_, err := ParseStream(strings.NewReader("{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n"), nil, nil)
	if !errors.Is(err, ErrNoTurn) {
		t.Fatalf("got %v, want ErrNoTurn", err)
	}
}
