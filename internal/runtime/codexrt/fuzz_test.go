package codexrt

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func FuzzParseStream(f *testing.F) {
	if b, err := os.ReadFile("testdata/turn.jsonl"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("{\"type\":\"turn.failed\",\"error\":{\"message\":\"x\"}}\n"))
	f.Add([]byte("{\"type\":\"item.completed\",\"item\":{\"id\":\"1\",\"type\":\"agent_message\",\"text\":\"\\u0000\"}}"))
	f.Add([]byte("null\n[]\n\"s\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tr bytes.Buffer
		res, err := ParseStream(bytes.NewReader(b), &tr, &recorder{})
		if err == nil && !res.Completed && !res.Failed {
			t.Fatalf("no error and no turn end: %+v", res)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "codex output") {
			t.Fatalf("error %q does not say where it came from", err)
		}
	})
}

func FuzzConfigTOML(f *testing.F) {
	f.Add("gpt-5.1-codex", "http://127.0.0.1:1/model", "be brief")
	f.Add("m\"\nx = 1", "http://h/\"]\n[x]", "\\\"\"\"\n[model_providers.evil]\n")
	f.Fuzz(func(t *testing.T, model, url, sys string) {
		b, err := ConfigTOML(model, url, sys)
		if err != nil {
			return
		}
		// Every line is a table header, blank, or one key = value; no value opens a table.
		keys := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "[") {
				switch l {
				case "[analytics]", "[feedback]", "[features]", "[model_providers.agora]":
				default:
					t.Fatalf("a value made table %q:\n%s", l, b)
				}
			} else if l != "" {
				keys++
			}
		}
		if want := 19; sys == "" && keys != want-1 || sys != "" && keys != want {
			t.Fatalf("got %d key lines, want %d (a value spilled onto its own line):\n%s", keys, want, b)
		}
	})
}
