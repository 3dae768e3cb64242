package codexrt

import (
	"bytes"
	"encoding/json"
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
	f.Add([]byte(`{"type":"item.started","item":{"id":"1","type":"command_execution","command":"a","Command":"b"}}` + "\n"))
	f.Add([]byte(`{"type":"item.started","item":{"id":"1","type":"command_execution","command":"a"}}` + "\n" + `{"type":"turn.completed"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tr bytes.Buffer
		var rec recorder
		res, err := ParseStream(bytes.NewReader(b), &tr, &rec)
		if err == nil && !res.Completed && !res.Failed {
			t.Fatalf("no error and no turn end: %+v", res)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "codex output") {
			t.Fatalf("error %q does not say where it came from", err)
		}
		// Every item shown to the observer is what a case-sensitive reader of its line sees.
		var seen []Item
		for _, line := range bytes.Split(b, []byte("\n")) {
			var ev map[string]any
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			it, _ := ev["item"].(map[string]any)
			if typ := ev["type"]; it == nil || typ != "item.started" && typ != "item.completed" {
				continue
			}
			str := func(k string) string { s, _ := it[k].(string); return s }
			seen = append(seen, Item{ID: str("id"), Type: str("type"), Command: str("command")})
		}
		shown := append(append([]Item(nil), rec.started...), rec.completed...)
		for _, got := range shown {
			found := false
			for _, w := range seen {
				found = found || w.ID == got.ID && w.Type == got.Type && w.Command == got.Command
			}
			if !found {
				t.Fatalf("item %+v shown to the observer is not what a case-sensitive reader sees (%+v)", got, seen)
			}
		}
	})
}

func FuzzConfigTOML(f *testing.F) {
	f.Add("gpt-5.1-codex", "http://127.0.0.1:1/model", "be brief", "agora-relay-00")
	f.Add("m\"\nx = 1", "http://h/\"]\n[x]", "\\\"\"\"\n[model_providers.evil]\n", "t\"\n[x]")
	f.Fuzz(func(t *testing.T, model, url, sys, token string) {
		b, err := ConfigTOML(model, url, sys, token)
		if err != nil {
			return
		}
		// Every line is a table header, blank, or one key = value; no value opens a table.
		keys := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "[") {
				switch l {
				case "[analytics]", "[feedback]", "[features]", "[shell_environment_policy]", "[model_providers.agora]":
				default:
					t.Fatalf("a value made table %q:\n%s", l, b)
				}
			} else if l != "" {
				keys++
			}
		}
		want := 19
		if sys != "" {
			want++
		}
		if token != "" {
			want++
		}
		if keys != want {
			t.Fatalf("got %d key lines, want %d (a value spilled onto its own line):\n%s", keys, want, b)
		}
	})
}
