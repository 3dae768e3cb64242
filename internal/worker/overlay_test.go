package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

func TestWorker_CapabilityFilesStayOutOfTheWorkspace(t *testing.T) {
	f := newFixture(t, `cat "$AGORA_CAPABILITIES/first/README.md" > "$AGORA_OUT/seen"
"$AGORA_CAPABILITIES/first/bin/tool.sh" > "$AGORA_OUT/tool"
cat README.md > "$AGORA_OUT/repo-readme"`)
	f.caps = []testCap{
		{name: "first", yaml: "commands:\n  - sh -c *\n", exec: []string{"bin/tool.sh"}, files: map[string]string{
			"README.md": "the capability's readme\n", "bin/tool.sh": "#!/bin/sh\necho tool ran\n", "link": "->README.md",
		}},
		{name: "second", files: map[string]string{"README.md": "second's readme\n"}},
	}
	initRepo(t, f.ws(), map[string]string{"README.md": "the repository's readme\n"})
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	for name, want := range map[string]string{"seen": "the capability's readme\n", "tool": "tool ran\n", "repo-readme": "the repository's readme\n"} {
		if got := readFile(t, f.outPath(name)); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, p := range []string{"bin", "link", "capability.yaml"} {
		if exists(f.ws(p)) {
			t.Errorf("%s was copied into the workspace", p)
		}
	}
	if res.Patch == nil || res.Patch.Bytes != 0 {
		t.Errorf("want an empty patch, got %+v", res.Patch)
	}
}

func TestWorker_OverlayPatternsPlaceFilesAndLeaveThemOutOfThePatch(t *testing.T) {
	f := newFixture(t, `test -f CLAUDE.md && test -f .claude/settings.json || exit 7
test ! -e tool.sh || exit 8
echo changed >> CLAUDE.md
rm .claude/settings.json
ln -sf /etc/shadow .claude/hooks.json
echo new > new.txt`)
	f.caps[0].yaml = "commands:\n  - sh -c *\noverlay: [\".claude/**\", CLAUDE.md]\n"
	f.caps[0].files = map[string]string{
		"CLAUDE.md": "house rules\n", ".claude/settings.json": "{}\n", ".claude/hooks.json": "[]\n", "tool.sh": "echo\n",
	}
	initRepo(t, f.ws(), map[string]string{"README.md": "repo\n"})
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q (exit %d)", res.Status, res.Reason, res.Detail, res.ExitCode)
	}
	patch := checkPatch(t, f, res)
	if res.Patch.FilesChanged != 1 || !strings.Contains(patch, "new.txt") {
		t.Errorf("want a patch of new.txt only, got:\n%s", patch)
	}
	for _, p := range []string{"CLAUDE.md", ".claude", "shadow"} {
		if strings.Contains(patch, p) {
			t.Errorf("the overlaid %s is in the patch:\n%s", p, patch)
		}
	}
}

func TestWorker_OverlayRefusesAPathTheCheckoutHas(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, marker)
	f.caps[0].yaml = "commands:\n  - sh -c *\noverlay: [\"**\"]\n"
	f.caps[0].files = map[string]string{"link": "from the capability\n"}
	if err := os.Symlink(outside, f.ws("link")); err != nil {
		t.Fatal(err)
	}
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonIntegrityFailed || !strings.Contains(res.Detail, "already in the workspace") {
		t.Fatalf("got %q %q %q, want failed integrity-failed: already in the workspace", res.Status, res.Reason, res.Detail)
	}
	if got := readFile(t, outside); got != "untouched\n" {
		t.Errorf("the file behind the symlink changed: %q", got)
	}
	if agentRan(f) {
		t.Error("the agent ran")
	}
}

func TestWorker_OverlayRefusesWorkspaceSymlinks(t *testing.T) {
	tests := []struct {
		name    string
		plant   func(t *testing.T, f *fixture, outside string)
		capFile string
		detail  string
		victim  string // a path, relative to outside, that must not exist afterwards
	}{
		{"symlink to a directory outside", func(t *testing.T, f *fixture, outside string) {
			if err := os.Symlink(outside, f.ws("evil")); err != nil {
				t.Fatal(err)
			}
		}, "evil/x", "through a symlink", "x"},
		{"relative symlink out", func(t *testing.T, f *fixture, outside string) {
			rel, err := filepath.Rel(f.ws("a"), outside)
			if err != nil {
				t.Fatal(err)
			}
			os.Mkdir(f.ws("a"), 0o755)
			if err := os.Symlink(rel, f.ws("a", "evil")); err != nil {
				t.Fatal(err)
			}
		}, "a/evil/x", "through a symlink", "x"},
		{"symlink inside the workspace", func(t *testing.T, f *fixture, outside string) {
			os.Mkdir(f.ws("real"), 0o755)
			if err := os.Symlink("real", f.ws("inner")); err != nil {
				t.Fatal(err)
			}
		}, "inner/x", "through a symlink", ""},
		{"file where a directory is needed", func(t *testing.T, f *fixture, outside string) {
			os.WriteFile(f.ws("dir"), []byte("a file\n"), 0o644)
		}, "dir/x", "is a file, the capability needs a directory", ""},
		{"directory where the file goes", func(t *testing.T, f *fixture, outside string) {
			os.MkdirAll(f.ws("x", "y"), 0o755)
		}, "x", "already in the workspace", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outside := t.TempDir()
			f := newFixture(t, marker)
			f.caps[0].yaml = "commands:\n  - sh -c *\noverlay: [\"**\"]\n"
			f.caps[0].files = map[string]string{tt.capFile: "capability content\n"}
			tt.plant(t, f, outside)
			f.write()
			_, res := f.run()
			if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonIntegrityFailed {
				t.Fatalf("got %q %q %q, want failed integrity-failed", res.Status, res.Reason, res.Detail)
			}
			if !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("detail %q does not contain %q", res.Detail, tt.detail)
			}
			if tt.victim != "" && exists(filepath.Join(outside, tt.victim)) {
				t.Errorf("the overlay wrote outside the workspace")
			}
			if exists(f.ws("real", "x")) {
				t.Errorf("the overlay wrote through an in-workspace symlink")
			}
			if agentRan(f) {
				t.Error("the agent ran")
			}
		})
	}
}

func setupCap(script string) testCap {
	return testCap{
		name:  "setup",
		yaml:  "commands:\n  - sh -c *\nsetup: scripts/setup.sh\n",
		files: map[string]string{"scripts/setup.sh": script},
	}
}

func TestWorker_SetupRunsBeforeBaseline(t *testing.T) {
	f := newFixture(t, `test -f generated.txt || exit 4
echo agent > agent.txt`)
	f.caps = []testCap{setupCap(`echo setup-stdout
echo generated > generated.txt
printf '%s\n' "$GREETING" > greeting.txt
pwd > where.txt`)}
	initRepo(t, f.ws(), map[string]string{"README": "repo\n"})
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q (exit %d)", res.Status, res.Reason, res.Detail, res.ExitCode)
	}
	patch := checkPatch(t, f, res)
	if res.Patch.FilesChanged != 1 || !strings.Contains(patch, "agent.txt") {
		t.Errorf("want a patch of agent.txt only, got:\n%s", patch)
	}
	for _, p := range []string{"generated.txt", "greeting.txt", "setup.sh"} {
		if strings.Contains(patch, p) {
			t.Errorf("setup's %s is in the patch:\n%s", p, patch)
		}
	}
	if got := readFile(t, f.ws("greeting.txt")); got != "hi\n" {
		t.Errorf("setup env GREETING = %q, want hi", got)
	}
	if got := strings.TrimSpace(readFile(t, f.ws("where.txt"))); got != f.ws() {
		t.Errorf("setup ran in %q, want the workspace", got)
	}
	if strings.Contains(f.stdout.String(), "setup-stdout") || !strings.Contains(f.stderr.String(), "setup-stdout") {
		t.Errorf("setup output belongs on stderr: stdout %q stderr %q", f.stdout.String(), f.stderr.String())
	}
}

func TestWorker_SetupFailures(t *testing.T) {
	tests := []struct {
		name    string
		caps    []testCap
		timeout int
		reason  wire.Reason
		detail  string
	}{
		{"non-zero exit", []testCap{setupCap("exit 5")}, 60, lifecycle.ReasonWorkerFailed, "exited with code 5"},
		{"timeout kills it", []testCap{setupCap("sleep 100 & sleep 100")}, 1, lifecycle.ReasonWorkerFailed, "timed out"},
		{"script in the layout differs from the archive", []testCap{setupCap("echo first")}, 60,
			lifecycle.ReasonIntegrityFailed, "does not hold the capability's bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, marker)
			f.caps = tt.caps
			f.man.SetupTimeoutSeconds = tt.timeout
			f.write()
			if tt.reason == lifecycle.ReasonIntegrityFailed {
				script := filepath.Join(f.root, wire.CapabilityFilesDir, "setup", "scripts", "setup.sh")
				os.Chmod(script, 0o700)
				if err := os.WriteFile(script, []byte("echo imposter\n"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			_, res := f.run()
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
			if res.Status != wire.StatusFailed || res.Reason != tt.reason || !strings.Contains(res.Detail, tt.detail) {
				t.Fatalf("got %q %q %q, want failed %s with %q", res.Status, res.Reason, res.Detail, tt.reason, tt.detail)
			}
			if last := res.Phases[len(res.Phases)-1]; last.Name != wire.PhaseSetup || last.OK {
				t.Errorf("last phase %+v, want setup failed", last)
			}
			if agentRan(f) {
				t.Error("the agent ran")
			}
		})
	}
}
