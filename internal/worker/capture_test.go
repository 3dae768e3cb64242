package worker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

func TestWorker_GitattributesFiltersNeverRun(t *testing.T) {
	markers := t.TempDir()
	id := make([]byte, 8)
	rand.Read(id)
	pwned := func(what string) string { return filepath.Join(markers, "pwned-"+what+"-"+hex.EncodeToString(id)) }

	f := newFixture(t, `printf 'two\n' > a.txt; printf 'new\n' > b.txt`)
	initRepo(t, f.ws(), map[string]string{
		".gitattributes": "* filter=evil diff=evil merge=evil\n",
		"a.txt":          "one\n",
	})
	fresh := cloneRepo(t, f.ws())
	// The checkout's own config defines the drivers and hooks (after the commit, so the
	// test's own git never ran them).
	hooks := f.ws(".git", "evil-hooks")
	os.MkdirAll(hooks, 0o755)
	for _, h := range []string{"pre-commit", "post-index-change", "fsmonitor-watchman"} {
		os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\ntouch "+pwned("hook-"+h)+"\n"), 0o755)
	}
	cfg, err := os.OpenFile(f.ws(".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WriteString(`[filter "evil"]
	clean = touch ` + pwned("clean") + `
	smudge = touch ` + pwned("smudge") + `
	process = touch ` + pwned("process") + `
	required = true
[diff "evil"]
	textconv = touch ` + pwned("textconv") + `
	command = touch ` + pwned("diffcmd") + `
[core]
	fsmonitor = ` + filepath.Join(hooks, "fsmonitor-watchman") + `
	hooksPath = ` + hooks + `
`)
	cfg.Close()
	f.write()

	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	entries, _ := os.ReadDir(markers)
	for _, e := range entries {
		t.Errorf("capture ran a program from the checkout's config: %s", e.Name())
	}
	if res.Patch.FilesChanged != 2 {
		t.Errorf("got %d files changed, want 2", res.Patch.FilesChanged)
	}
	applyPatch(t, f, fresh)
	for p, want := range map[string]string{"a.txt": "two\n", "b.txt": "new\n"} {
		if got := readFile(t, filepath.Join(fresh, p)); got != want {
			t.Errorf("%s after apply = %q, want %q", p, got, want)
		}
	}
}

func TestWorker_AttributesDoNotTransformCapturedBytes(t *testing.T) {
	f := newFixture(t, `printf 'x\r\n$Id: 1234abcd $\r\n' > c.txt`)
	initRepo(t, f.ws(), map[string]string{".gitattributes": "*.txt text eol=crlf ident working-tree-encoding=UTF-16\n"})
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	patch := checkPatch(t, f, res)
	if !strings.Contains(patch, "+x\r\n+$Id: 1234abcd $\r\n") {
		t.Errorf("the patch does not carry the workspace's bytes:\n%q", patch)
	}
}

func TestWorker_SymlinkCapturedAsSymlink(t *testing.T) {
	f := newFixture(t, `ln -s /etc/passwd leak`)
	initRepo(t, f.ws(), map[string]string{"README": "x\n"})
	fresh := cloneRepo(t, f.ws())
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	patch := checkPatch(t, f, res)
	if !strings.Contains(patch, "new file mode 120000") || !strings.Contains(patch, "+/etc/passwd") {
		t.Errorf("want a symlink entry, got:\n%s", patch)
	}
	if passwd, err := os.ReadFile("/etc/passwd"); err == nil {
		if line, _, _ := strings.Cut(string(passwd), "\n"); line != "" && strings.Contains(patch, line) {
			t.Errorf("the patch holds the content of /etc/passwd:\n%s", patch)
		}
	}
	applyPatch(t, f, fresh)
	if target, err := os.Readlink(filepath.Join(fresh, "leak")); err != nil || target != "/etc/passwd" {
		t.Errorf("after apply: %q, %v; want a symlink to /etc/passwd", target, err)
	}
}

func TestWorker_FileAndDirectorySwapPlaces(t *testing.T) {
	f := newFixture(t, `rm d && mkdir d && echo x > d/x
rm -r e && echo efile > e`)
	initRepo(t, f.ws(), map[string]string{"d": "a file\n", "e/f": "in a directory\n"})
	fresh := cloneRepo(t, f.ws())
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	if checkPatch(t, f, res); res.Patch.FilesChanged != 4 {
		t.Errorf("got %d files changed, want 4", res.Patch.FilesChanged)
	}
	applyPatch(t, f, fresh)
	if readFile(t, filepath.Join(fresh, "d", "x")) != "x\n" || readFile(t, filepath.Join(fresh, "e")) != "efile\n" {
		t.Error("the patch did not swap the file and the directory")
	}
}

func TestWorker_OwnGitDirIgnored(t *testing.T) {
	f := newFixture(t, `echo change >> README; echo junk > .git/junk-from-agent`)
	initRepo(t, f.ws(), map[string]string{"README": "x\n"})
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	patch := checkPatch(t, f, res)
	if strings.Contains(patch, ".git/") || res.Patch.FilesChanged != 1 {
		t.Errorf("the checkout's .git is in the patch:\n%s", patch)
	}
}

func TestWorker_TimeoutKillsGrandchildren(t *testing.T) {
	f := newFixture(t, `sleep 100 & echo $! >> "$AGORA_OUT/pids"
sh -c 'sleep 100 & echo $! >> "$AGORA_OUT/pids"; wait' &
echo work > partial.txt
sleep 100`)
	f.man.AgentTimeoutSeconds = 1
	f.write()
	start := time.Now()
	_, res := f.run()
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonTimeout || res.ExitCode != -1 {
		t.Fatalf("got %q %q exit %d %q, want failed timeout -1", res.Status, res.Reason, res.ExitCode, res.Detail)
	}
	var pids []int
	for _, s := range strings.Fields(readFile(t, f.outPath("pids"))) {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, n)
	}
	if len(pids) != 2 {
		t.Fatalf("got pids %v, want 2", pids)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("grandchild %d survived the timeout", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The work so far is captured; the timeout wins over any question.
	if res.Patch == nil || res.Patch.FilesChanged != 1 {
		t.Errorf("patch %+v, want the partial work", res.Patch)
	}
	if diff := cmp.Diff([]string{wire.PhaseVerify, wire.PhaseSecrets, wire.PhaseNetwork, wire.PhaseOverlay, wire.PhaseSetup, wire.PhaseBaseline,
		wire.PhaseRuntime, wire.PhaseStop, wire.PhaseCapture, wire.PhaseOutputs}, phaseNames(res)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return !(i > 0 && i+2 < len(s) && s[i+2] == 'Z')
}

func TestWorker_Outputs(t *testing.T) {
	f := newFixture(t, `o="$AGORA_OUT/outputs"
mkdir -p "$o/sub" "$o/empty"
printf 'report' > "$o/report.md"
printf '\000\001' > "$o/sub/data.bin"
printf 'x' > "$o/a-c"
ln -s /etc/passwd "$o/link"
mkfifo "$o/pipe"
printf 'bad' > "$o/$(printf 'bad\001name')"`)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	want := []wire.OutputInfo{
		{Path: "outputs/a-c", Size: 1, SHA256: hexSum("x")},
		{Path: "outputs/report.md", Size: 6, SHA256: hexSum("report")},
		{Path: "outputs/sub/data.bin", Size: 2, SHA256: hexSum("\x00\x01")},
	}
	if diff := cmp.Diff(want, res.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	wantSkipped := []wire.SkippedOutput{
		{Path: `outputs/"bad\x01name"`, Why: wire.SkipUnprintable},
		{Path: "outputs/link", Why: wire.SkipSymlink},
		{Path: "outputs/pipe", Why: wire.SkipNotRegular},
	}
	if diff := cmp.Diff(wantSkipped, res.OutputsSkipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestWorker_OutputsDirectorySymlink(t *testing.T) {
	f := newFixture(t, `ln -s /etc "$AGORA_OUT/outputs"`)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK || len(res.Outputs) != 0 {
		t.Fatalf("got %q %q outputs %v", res.Status, res.Detail, res.Outputs)
	}
	if diff := cmp.Diff([]wire.SkippedOutput{{Path: "outputs/.", Why: wire.SkipSymlink}}, res.OutputsSkipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWorker_TooManyOutputs(t *testing.T) {
	f := newFixture(t, `mkdir -p "$AGORA_OUT/outputs"; cd "$AGORA_OUT/outputs"
i=0; while [ $i -le `+strconv.Itoa(wire.MaxOutputs)+` ]; do : > f$i; i=$((i+1)); done`)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(res.Detail, "more than 256 files") {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	if len(res.Outputs) != wire.MaxOutputs {
		t.Errorf("listed %d outputs, want the %d that fit", len(res.Outputs), wire.MaxOutputs)
	}
}

// An empty workspace (no repository, no overlaid file) has the empty tree as its baseline:
// the worker records it without git, and runs none at all when the agent leaves nothing.
func TestWorker_EmptyWorkspaceRunsNoGit(t *testing.T) {
	f := newFixture(t, `true`)
	f.caps[0].files = nil
	f.write()
	before := gitRuns.Load()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	if n := gitRuns.Load() - before; n != 0 {
		t.Errorf("the worker ran git %d times for an empty workspace, want 0", n)
	}
	emptySum := sha256.Sum256(nil)
	want := &wire.PatchInfo{Path: wire.PatchFile, SHA256: hex.EncodeToString(emptySum[:])}
	if diff := cmp.Diff(want, res.Patch); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(f.outPath(wire.PatchFile)); err != nil || len(b) != 0 {
		t.Errorf("patch.diff = %q, %v; want an empty file", b, err)
	}
	if ents, _ := os.ReadDir(f.tmp); len(ents) != 0 {
		t.Errorf("the worker left %d entries in its temp dir, want none", len(ents))
	}
}

// What the agent writes into an empty workspace is captured against the empty tree: git
// runs twice (add, diff), and the patch recreates every file on an empty checkout.
func TestWorker_EmptyBaselineCapturesNewFiles(t *testing.T) {
	f := newFixture(t, `printf 'one\n' > a.txt; mkdir -p d/e && printf 'two\n' > d/e/b.txt
printf 'bin\000ary' > c.bin; ln -s a.txt link; mkdir empty-dir`)
	f.caps[0].files = nil
	f.write()
	before := gitRuns.Load()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	if n := gitRuns.Load() - before; n != 2 {
		t.Errorf("the worker ran git %d times, want 2 (add and diff at capture)", n)
	}
	if res.Patch.FilesChanged != 4 {
		t.Errorf("got %d files changed, want 4", res.Patch.FilesChanged)
	}
	fresh := t.TempDir()
	git(t, fresh, "init", "-q")
	applyPatch(t, f, fresh)
	for p, want := range map[string]string{"a.txt": "one\n", "d/e/b.txt": "two\n", "c.bin": "bin\x00ary"} {
		if got := readFile(t, filepath.Join(fresh, p)); got != want {
			t.Errorf("%s after apply = %q, want %q", p, got, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(fresh, "link")); err != nil || target != "a.txt" {
		t.Errorf("link after apply: %q, %v; want a link to a.txt", target, err)
	}
}
