package dispatch_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// repoWith makes a git repository holding files, committed.
func repoWith(t *testing.T, files map[string]string) string {
	t.Helper()
	repo := t.TempDir()
	gitT(t, repo, "init", "-q", "-b", "main")
	for p, s := range files {
		full := filepath.Join(repo, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-qm", "init")
	return repo
}

func applies(t *testing.T, repo, patch string) {
	t.Helper()
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the patch does not apply to the repository: %v\n%s\n%s", err, out, patch)
	}
}

// TestAttack_CapabilityMountReplaced: the agent tries to put files of its own where
// $AGORA_CAPABILITIES points (a symlink to a directory it made in the workspace, a rename,
// a bind mount) and to change the capability's files in place. Every attempt fails, it reads
// the capability's bytes afterwards, and the next dispatch sees them too.
func TestAttack_CapabilityMountReplaced(t *testing.T) {
	e := newEnv(t)
	e.capability("tools", "commands: [\"sh -c *\"]\n", map[string]string{"file": "original\n", "bin/run.sh": "echo ran\n"})
	attack := `mkdir -p fake/tools && echo forged > fake/tools/file
for try in \
  'rm -rf /agora/capabilities' \
  'mv /agora/capabilities /agora/old' \
  'ln -sfn /agora/workspace/fake /agora/capabilities' \
  'rm -rf /agora/capabilities/tools' \
  'mv /agora/capabilities/tools /agora/capabilities/old' \
  'ln -sfn /agora/workspace/fake/tools /agora/capabilities/tools' \
  'ln -s /agora/workspace/fake /agora/capabilities/fake' \
  'echo x > /agora/capabilities/tools/file' \
  'rm /agora/capabilities/tools/file' \
  'chmod 0777 /agora/capabilities/tools/bin' \
  'touch /agora/capabilities/tools/bin/new' \
  'mount --bind /agora/workspace/fake /agora/capabilities'
do
  if sh -c "$try" 2>/dev/null; then echo "SUCCEEDED: $try"; fi
done
echo "AGORA_CAPABILITIES=$AGORA_CAPABILITIES"
cat "$AGORA_CAPABILITIES/tools/file"`
	if err := e.subagentWith("attacker", attack, "tools"); err != nil {
		t.Fatal(err)
	}
	repo := repoWith(t, map[string]string{"README.md": "repo\n"})
	rec := e.run(dispatch.Request{Subagent: "attacker", Repo: repo})
	if rec.State != lifecycle.DispatchFinished {
		t.Fatalf("got %s %s %q", rec.State, rec.Reason, rec.Detail)
	}
	out := e.stdout(rec)
	if strings.Contains(out, "SUCCEEDED") || strings.Contains(out, "forged") {
		t.Errorf("the agent changed the capability files:\n%s", out)
	}
	if !strings.Contains(out, "AGORA_CAPABILITIES=/agora/capabilities\n") || !strings.HasSuffix(out, "original\n") {
		t.Errorf("want the capability's own file at /agora/capabilities after the attempts:\n%s", out)
	}
	if err := e.subagentWith("reader", `cat "$AGORA_CAPABILITIES/tools/file"`, "tools"); err != nil {
		t.Fatal(err)
	}
	if got := e.stdout(e.run(dispatch.Request{Subagent: "reader"})); got != "original\n" {
		t.Errorf("the next dispatch read %q, want the capability's bytes", got)
	}
}

// TestDispatch_CapabilityFilesReadOnlyWithoutSandbox: under `sandbox: none` the layout is
// below AGORA_WORKER_ROOT with no write bit anywhere in it, which is all a host path can be
// made. The agent there runs as agora's own user (root here), which modes do not stop: what
// holds is that the files come afresh from the catalog for each dispatch and are removed
// after it, so the next dispatch reads the capability's bytes.
func TestDispatch_CapabilityFilesReadOnlyWithoutSandbox(t *testing.T) {
	e := newEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.capability("tools", "commands: [\"sh -c *\"]\nsetup: setup.sh\n", map[string]string{
		"file": "original\n", "bin/run.sh": "echo ran\n", "setup.sh": "pwd > setup-ran-in\necho \"$0\" > setup-path\n",
	}, "bin/run.sh")
	script := `echo "root=$(dirname "$AGORA_OUT")"
echo "setup=$(cat setup-path) in $(cat setup-ran-in)"
echo "caps=$AGORA_CAPABILITIES"
echo "writable:"; find "$AGORA_CAPABILITIES" -perm /222 ! -type l
echo "end"
"$AGORA_CAPABILITIES/tools/bin/run.sh"
if [ "$(id -u)" = 0 ]; then echo changed > "$AGORA_CAPABILITIES/tools/file"; fi`
	if err := e.subagentWith("nobox-agent", script, "tools"); err != nil {
		t.Fatal(err)
	}
	rec := e.run(dispatch.Request{Subagent: "nobox-agent", Target: "nobox"})
	if rec.State != lifecycle.DispatchFinished {
		t.Fatalf("got %s %s %q", rec.State, rec.Reason, rec.Detail)
	}
	out := e.stdout(rec)
	var root, caps string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "root="); ok {
			root = v
		}
		if v, ok := strings.CutPrefix(l, "caps="); ok {
			caps = v
		}
	}
	if root == "" || caps != filepath.Join(root, "capabilities") {
		t.Fatalf("AGORA_CAPABILITIES = %q, want capabilities below AGORA_WORKER_ROOT %q:\n%s", caps, root, out)
	}
	if !strings.Contains(out, "writable:\nend\n") {
		t.Errorf("something in the layout has a write bit:\n%s", out)
	}
	if !strings.Contains(out, "ran\n") {
		t.Errorf("the capability's script did not run from the layout:\n%s", out)
	}
	if _, err := os.Lstat(caps); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the layout %s is still there after the dispatch: %v", caps, err)
	}
	if want := "setup=" + caps + "/tools/setup.sh in " + filepath.Join(root, "workspace") + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %q: setup runs from the layout in the workspace:\n%s", want, out)
	}
	if err := e.subagentWith("nobox-reader", `cat "$AGORA_CAPABILITIES/tools/file"`, "tools"); err != nil {
		t.Fatal(err)
	}
	if got := e.stdout(e.run(dispatch.Request{Subagent: "nobox-reader", Target: "nobox"})); got != "original\n" {
		t.Errorf("the next dispatch read %q, want the capability's bytes", got)
	}
}

// TestAttack_OverlaidFilesNeverInThePatch: the agent edits one overlaid file, deletes
// another, turns a third into a symlink to /etc/shadow and a fourth into a symlink to a FIFO
// (capture reading through it would block until the dispatch's timeout). The patch holds
// only the agent's change to the repository, and applies to it.
func TestAttack_OverlaidFilesNeverInThePatch(t *testing.T) {
	e := newEnv(t)
	e.capability("settings", "overlay: [\".claude/**\", CLAUDE.md]\n", map[string]string{
		"CLAUDE.md": "house rules\n", ".claude/settings.json": "{}\n", ".claude/hooks.json": "[]\n",
		".claude/agents/x.md": "x\n", "tool.sh": "echo tool\n",
	})
	script := `test -f CLAUDE.md && test -f .claude/agents/x.md && test ! -e tool.sh || exit 9
echo edited >> CLAUDE.md
rm .claude/settings.json
ln -sf /etc/shadow .claude/hooks.json
mkfifo /tmp/block && ln -sf /tmp/block .claude/agents/x.md
echo agent >> README.md`
	if err := e.subagentWith("editor", script, "shell", "settings"); err != nil {
		t.Fatal(err)
	}
	repo := repoWith(t, map[string]string{"README.md": "repo\n"})
	start := time.Now()
	rec := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Timeout: time.Minute})
	if rec.State != lifecycle.DispatchFinished {
		t.Fatalf("got %s %s %q", rec.State, rec.Reason, rec.Detail)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the dispatch took %v: capture read through the FIFO link", d)
	}
	patch := e.patch(rec)
	for _, p := range []string{"CLAUDE.md", ".claude", "shadow", "block", "house rules", "edited"} {
		if strings.Contains(patch, p) {
			t.Errorf("the patch holds %q:\n%s", p, patch)
		}
	}
	if strings.Count(patch, "diff --git ") != 1 || !strings.Contains(patch, "+agent") {
		t.Errorf("want a patch of README.md only:\n%s", patch)
	}
	applies(t, repo, patch)
}

// TestAccept_OverlayClashOfAStoredSubagent: a subagent already in the catalog whose
// capabilities overlay the same path (registered before the rule, or written by an older
// agora) is refused at accept, before the record, like a path the repository has.
func TestAccept_OverlayClashOfAStoredSubagent(t *testing.T) {
	e := newEnv(t)
	e.capability("one", "overlay: [CLAUDE.md]\n", map[string]string{"CLAUDE.md": "one\n"})
	e.capability("two", "overlay: [\"*.md\"]\n", map[string]string{"CLAUDE.md": "two\n"})
	if err := e.subagentWith("both", "true", "one", "two"); err == nil {
		t.Fatal("registration accepted two capabilities overlaying CLAUDE.md")
	}
	var pins []catalog.Pin
	for _, n := range []string{"shell", "one", "two"} {
		v, err := e.d.Catalog.Resolve(t.Context(), catalog.KindCapability, n)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, catalog.Pin{Name: v.Name, Digest: v.Digest})
	}
	doc := catalog.SubagentDoc{Runtime: "exec", Command: []string{"sh", "-c", "true"}, Capabilities: pins}
	data, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := &provision.Pending{Kind: catalog.KindSubagent, Name: "both", Content: data, Digest: digest.Sum(data),
		Meta: catalog.Meta{Runtime: "exec", Capabilities: pins}}
	if _, _, err := e.w.Register(t.Context(), "test", "register", p); err != nil {
		t.Fatal(err)
	}
	before, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"", repoWith(t, map[string]string{"README.md": "x\n"})} {
		_, err = e.d.Accept(t.Context(), dispatch.Request{Subagent: "both", Repo: repo, Actor: "test"})
		var re *dispatch.RequestError
		var clash *catalog.OverlayClash
		if !errors.As(err, &re) || !errors.As(err, &clash) || !strings.Contains(err.Error(), `capabilities "one" and "two" both overlay CLAUDE.md`) {
			t.Errorf("repo %q: got %v, want the clash refused", repo, err)
		}
	}
	after, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("a refused clash wrote a record: %d records, want %d", len(after), len(before))
	}
}
