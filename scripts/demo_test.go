package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestDemo_TellsItsStory runs scripts/demo.sh as make demo does (agora and its worker built
// from this tree, a fresh AGORA_HOME, real bubblewrap and git) and checks that what it prints
// shows the story it tells (five identical GREETING.txt patches showed none of
// it): every task's patch touches a file of its own, the review's REVIEW.md quotes the line
// greet-docs handed off, the two tasks with disjoint locks ran at overlapping times and the two
// sharing a lock never did.
func TestDemo_TellsItsStory(t *testing.T) {
	for _, tool := range []string{"bwrap", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed; the demo needs it (scripts/prereqs.sh says how to install it)", tool)
		}
	}
	bin, cleanup, err := agoratest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	script, err := filepath.Abs("demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "AGORA_BIN="+bin, "AGORA_HOME="+filepath.Join(tmp, "home"), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	text := string(out)

	// One patch per task, each on its own file.
	files := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^--- ([a-z-]+)\.patch\ndiff --git a/(\S+) `).FindAllStringSubmatch(text, -1) {
		if other, ok := files[m[2]]; ok {
			t.Errorf("tasks %s and %s both patch %s", other, m[1], m[2])
		}
		files[m[2]] = m[1]
	}
	want := map[string]string{"docs/GREETING.md": "greet-docs", "README.md": "greet-readme", "REVIEW.md": "review", "TIDY-A.txt": "tidy-a", "TIDY-B.txt": "tidy-b"}
	for f, task := range want {
		if files[f] != task {
			t.Errorf("%s is patched by %q, want %s (patches: %v)", f, files[f], task, files)
		}
	}
	// The hand-off: review quotes the line greet-docs wrote.
	handed := regexp.MustCompile(`(?m)^\+(hello from agora \(greet-docs ran [0-9:.]+ to [0-9:.]+ UTC\))$`).FindStringSubmatch(text)
	if handed == nil || !strings.Contains(text, "+    "+handed[1]) {
		t.Errorf("REVIEW.md does not quote greet-docs' line (%q):\n%s", handed, text)
	}
	// When each ran.
	ran := map[string][2]time.Time{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z-]+) ran ([0-9:.]+) to ([0-9:.]+) UTC$`).FindAllStringSubmatch(text, -1) {
		from, err1 := time.Parse("15:04:05.000", m[2])
		to, err2 := time.Parse("15:04:05.000", m[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("times of %s: %v %v", m[1], err1, err2)
		}
		ran[m[1]] = [2]time.Time{from, to}
	}
	overlap := func(a, b string) bool { return ran[a][0].Before(ran[b][1]) && ran[b][0].Before(ran[a][1]) }
	if len(ran) != 4 {
		t.Fatalf("the demo printed when %d tasks ran, want 4 (greet-docs, greet-readme, tidy-a, tidy-b):\n%s", len(ran), text)
	}
	if !overlap("greet-docs", "greet-readme") {
		t.Errorf("greet-docs %v and greet-readme %v did not run in parallel", ran["greet-docs"], ran["greet-readme"])
	}
	if overlap("tidy-a", "tidy-b") {
		t.Errorf("tidy-a %v and tidy-b %v overlap though they share the lock repo", ran["tidy-a"], ran["tidy-b"])
	}
}
