package claudert

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSettingsJSON: one command hook for every tool at each hook event, with the timeout; a
// shell given the command runs exactly the argv, whatever its words hold.
func TestSettingsJSON(t *testing.T) {
	words := []string{"printf", `%s\n`, "a'b c", "$HOME", "`id`", "'", `\`, "--x=;rm -rf /", ""}
	b, err := settingsJSON(words, 0)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Hooks) != len(HookEvents) {
		t.Fatalf("hooks for %d events, want %d: %s", len(s.Hooks), len(HookEvents), b)
	}
	for _, ev := range HookEvents {
		g := s.Hooks[ev]
		if len(g) != 1 || g[0].Matcher != "*" || len(g[0].Hooks) != 1 || g[0].Hooks[0].Type != "command" || g[0].Hooks[0].Timeout != HookTimeout {
			t.Fatalf("%s: %+v, want one command hook for every tool", ev, g)
		}
		out, err := exec.Command("/bin/sh", "-c", g[0].Hooks[0].Command).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", g[0].Hooks[0].Command, err)
		}
		if diff := cmp.Diff(words[2:], strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")); diff != "" {
			t.Errorf("the shell ran other words (-want +got):\n%s", diff)
		}
	}
	for _, bad := range [][]string{nil, {"a\x00b"}, {"x", "\t"}} {
		if _, err := settingsJSON(bad, 0); err == nil {
			t.Errorf("settingsJSON(%q) = nil error, want a refusal", bad)
		}
	}
}

func TestSettingsJSON_HookTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, HookTimeout}, {660, 660}} {
		b, err := settingsJSON([]string{"/agora/bin/agora-worker", "worker", "hook"}, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"timeout":`+strconv.Itoa(tc.want)) {
			t.Errorf("settingsJSON(timeout %d) = %s, want timeout %d", tc.in, b, tc.want)
		}
	}
}
