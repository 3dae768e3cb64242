package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// TestLearn_ClaudeWriteOutsideWorkspaceRealCLI (file.would_deny, the real claude CLI):
// in a learn dispatch claude's Write to a path outside the workspace (in /etc, and beside the
// workspace in /agora; claude's Write takes absolute paths, and gives its hook a relative one
// made absolute, which the worker takes for another call than the one printed) is refused by agora's hook as always, but first the worker, taking
// the call as claude printed it, records file.would_deny (reporter hook, the call id) and
// makes the write in the scratch directory; claude reads where it went. /etc is untouched,
// the patch holds nothing of it, and a process of the agent asking the relay to learn a call
// that is no Write (its own Bash call's id) is refused. Failed before: the writes were
// refused and nothing was recorded.
func TestLearn_ClaudeWriteOutsideWorkspaceRealCLI(t *testing.T) {
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	check := `cat /etc/agora-learned.conf 2>/dev/null || echo etc=absent; cat /tmp/agora-learn-writes-*/etc/agora-learned.conf; echo; ` +
		`S=$(grep -o '@agora-hook-[0-9a-f]*' /proc/net/unix | head -n1); ` +
		`curl -sS --abstract-unix-socket "${S#@}" -d '{"call_id":"toolu_look01"}' http://relay/learn/file -o /dev/null -w "forge=%{http_code}"`
	const key = "sk-ant-api03-e2e-learnwrite-0123456789a"
	api, err := anthropictest.Start(key, anthropictest.Turns(
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_write01", "Write",
			mustJSON(t, map[string]string{"file_path": "/etc/agora-learned.conf", "content": "LEARNED-ETC\n"}))}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_write02", "Write",
			mustJSON(t, map[string]string{"file_path": "/agora/escape.txt", "content": "LEARNED-UP\n"}))}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_look01", "Bash",
			mustJSON(t, map[string]string{"command": check, "description": "look"}))}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Done.")}},
	))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"ANTHROPIC_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	registerClaudeLearner(t, h, dir, api.URL, "tools: [write_file]\n", "writer")
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	id := learnDispatchFinished(t, h, "writer", repo, "write")
	results := toolResultsOf(t, api.Requests())
	for _, c := range []string{"toolu_write01", "toolu_write02"} {
		if got := results[c]; !strings.Contains(got, "file.would_deny") || !strings.Contains(got, "/tmp/agora-learn-writes-") {
			t.Errorf("%s came back %q, want it recorded and made in the scratch directory", c, got)
		}
	}
	if got := results["toolu_look01"]; !strings.Contains(got, "etc=absent") || !strings.Contains(got, "LEARNED-ETC") || !strings.Contains(got, "forge=400") {
		t.Errorf("the agent's look around came back %q; want /etc untouched, the scratch copy, the forged learn refused", got)
	}
	var files []struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", "file.would_deny", "-o", "json")), &files); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		d := f.Details
		got = append(got, fmt.Sprint(d["path"], " ", d["op"], " ", d["tool"], " ", d["reporter"], " ", d["call_id"]))
	}
	want := []string{"/etc/agora-learned.conf write Write hook toolu_write01", "/agora/escape.txt write Write hook toolu_write02"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("file.would_deny entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if patch := h.agora("dispatch", "patch", id); strings.Contains(patch, "LEARNED") {
		t.Errorf("a learned write reached the patch:\n%s", patch)
	}
}
