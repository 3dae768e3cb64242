package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

var allPhases = []string{wire.PhaseVerify, wire.PhaseSecrets, wire.PhaseNetwork, wire.PhaseOverlay, wire.PhaseSetup, wire.PhaseBaseline,
	wire.PhaseRuntime, wire.PhaseStop, wire.PhaseNeedsInput, wire.PhaseCapture, wire.PhaseOutputs}

// checkPatch checks PatchInfo against out/patch.diff and returns the patch text.
func checkPatch(t *testing.T, f *fixture, res wire.Result) string {
	t.Helper()
	if res.Patch == nil {
		t.Fatalf("no patch in result: %+v", res)
	}
	b, err := os.ReadFile(f.outPath(wire.PatchFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if res.Patch.Bytes != int64(len(b)) || res.Patch.SHA256 != hex.EncodeToString(sum[:]) || res.Patch.Path != wire.PatchFile {
		t.Errorf("patch info %+v does not describe patch.diff (%d bytes, sha256 %x)", res.Patch, len(b), sum)
	}
	return string(b)
}

// applyPatch applies out/patch.diff to dir with `git apply`, checking it first.
func applyPatch(t *testing.T, f *fixture, dir string) {
	t.Helper()
	git(t, dir, "apply", "--check", f.outPath(wire.PatchFile))
	git(t, dir, "apply", f.outPath(wire.PatchFile))
}

func TestWorker_HappyPath(t *testing.T) {
	f := newFixture(t, `echo agent says hi; echo agent warns >&2
printf 'changed\n' > existing.txt
mkdir -p src && printf 'package x\n' > src/new.go
rm gone.txt
printf '%s\n' "$AGORA_INPUT_JSON" > input.seen`)
	initRepo(t, f.ws(), map[string]string{"existing.txt": "original\n", "gone.txt": "bye\n", "keep/me.txt": "kept\n"})
	fresh := cloneRepo(t, f.ws())
	f.man.InputJSON = `{"k":1}`
	f.write()

	_, res := f.run()
	if res.Status != wire.StatusOK || res.Reason != "" || res.ExitCode != 0 || res.Detail != "" {
		t.Fatalf("got status %q reason %q exit %d detail %q, want ok", res.Status, res.Reason, res.ExitCode, res.Detail)
	}
	if diff := cmp.Diff(allPhases, phaseNames(res)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	for _, p := range res.Phases {
		if !p.OK {
			t.Errorf("phase %s not ok", p.Name)
		}
	}
	if f.stdout.String() != "agent says hi\n" || !strings.Contains(f.stderr.String(), "agent warns\n") {
		t.Errorf("agent output not passed through: stdout %q stderr %q", f.stdout.String(), f.stderr.String())
	}
	patch := checkPatch(t, f, res)
	if res.Patch.FilesChanged != 4 {
		t.Errorf("got %d files changed, want 4\n%s", res.Patch.FilesChanged, patch)
	}
	if strings.Contains(patch, "README.shell") {
		t.Errorf("overlaid capability files are part of the baseline, not of the patch:\n%s", patch)
	}

	// The acceptance test of the dispatch issue: the patch applies to the original revision.
	applyPatch(t, f, fresh)
	for p, want := range map[string]string{"existing.txt": "changed\n", "src/new.go": "package x\n", "input.seen": "{\"k\":1}\n", "keep/me.txt": "kept\n"} {
		if got := readFile(t, filepath.Join(fresh, p)); got != want {
			t.Errorf("%s after apply: got %q, want %q", p, got, want)
		}
	}
	if exists(filepath.Join(fresh, "gone.txt")) {
		t.Error("gone.txt still exists after apply")
	}
}

func TestWorker_BinaryChangeCapturedAndApplies(t *testing.T) {
	f := newFixture(t, `printf '\000\001\377\376binary\000\n\200' > img.bin
printf '\211PNG\r\n\032\n\000\000' > new.png`)
	initRepo(t, f.ws(), map[string]string{"img.bin": "\x00old\xff\xfe\x80 bytes"})
	fresh := cloneRepo(t, f.ws())
	f.write()

	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	patch := checkPatch(t, f, res)
	if !strings.Contains(patch, "GIT binary patch") || res.Patch.FilesChanged != 2 {
		t.Errorf("want a binary patch of 2 files, got %d files:\n%s", res.Patch.FilesChanged, patch)
	}
	applyPatch(t, f, fresh)
	for _, p := range []string{"img.bin", "new.png"} {
		if got, want := readFile(t, filepath.Join(fresh, p)), readFile(t, f.ws(p)); got != want {
			t.Errorf("%s after apply: got %q, want %q", p, got, want)
		}
	}
}

func TestWorker_NonZeroExit(t *testing.T) {
	f := newFixture(t, "echo partial > work.txt; exit 3")
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || res.ExitCode != 3 {
		t.Fatalf("got %q %q exit %d, want failed worker-failed exit 3", res.Status, res.Reason, res.ExitCode)
	}
	if !strings.Contains(res.Detail, "code 3") {
		t.Errorf("detail %q does not name the code", res.Detail)
	}
	// The partial work is still captured.
	if checkPatch(t, f, res); res.Patch.FilesChanged != 1 {
		t.Errorf("got %d files changed, want 1", res.Patch.FilesChanged)
	}
	if diff := cmp.Diff(allPhases, phaseNames(res)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
}

// TestWorker_ModelRuntimeWithoutGateway: the model runtimes reach their model only through
// the host's gateway; without its socket nothing runs.
func TestWorker_ModelRuntimeWithoutGateway(t *testing.T) {
	f := newFixture(t, "")
	f.runtime = "claude-code"
	f.command = nil
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed {
		t.Fatalf("got %q %q, want failed worker-failed", res.Status, res.Reason)
	}
	if !strings.Contains(res.Detail, `runtime "claude-code": gateway: no socket`) {
		t.Errorf("detail %q", res.Detail)
	}
	if diff := cmp.Diff([]string{wire.PhaseVerify}, phaseNames(res)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
}

func TestWorker_CancelledDuringAgent(t *testing.T) {
	f := newFixture(t, "sleep 100")
	f.write()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	code := run(ctx, options{Root: f.root, TempDir: f.tmp})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	res, err := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != wire.StatusFailed || !strings.Contains(res.Detail, "cancelled") {
		t.Errorf("got %q %q %q, want failed and cancelled", res.Status, res.Reason, res.Detail)
	}
}

func TestWorker_ResultUnwritable(t *testing.T) {
	f := newFixture(t, "true")
	f.write()
	if err := os.RemoveAll(f.outPath()); err != nil {
		t.Fatal(err)
	}
	if code := run(t.Context(), options{Root: f.root, TempDir: f.tmp, Stderr: &f.stderr}); code != 1 {
		t.Errorf("got exit code %d, want 1", code)
	}
	if !strings.Contains(f.stderr.String(), "write result.json") {
		t.Errorf("stderr %q does not say what failed", f.stderr.String())
	}
}

func TestWorker_PlantedOutFilesAreReplaced(t *testing.T) {
	victims := t.TempDir()
	f := newFixture(t, `ln -s `+victims+`/patch $AGORA_OUT/patch.diff
ln -s `+victims+`/result $AGORA_OUT/result.json
echo x > work.txt`)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
	for _, p := range []string{"patch", "result"} {
		if exists(filepath.Join(victims, p)) {
			t.Errorf("the worker wrote through a planted symlink to %s", p)
		}
	}
	for _, p := range []string{wire.PatchFile, wire.ResultFile} {
		if fi, err := os.Lstat(f.outPath(p)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file: %v", p, err)
		}
	}
}

func TestWorker_PlantedResultDirectory(t *testing.T) {
	f := newFixture(t, `mkdir -p $AGORA_OUT/result.json/x`)
	f.write()
	if _, res := f.run(); res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
}

func TestWorker_PatchTooLarge(t *testing.T) {
	f := newFixture(t, `i=0; while [ $i -lt 50 ]; do echo "line $i of a long file" >> big.txt; i=$((i+1)); done`)
	f.maxPatch = 256
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(res.Detail, "over the 256 byte limit") {
		t.Fatalf("got %q %q %q, want failed worker-failed over the limit", res.Status, res.Reason, res.Detail)
	}
	if res.Patch != nil || exists(f.outPath(wire.PatchFile)) {
		t.Errorf("a truncated patch was kept: %+v", res.Patch)
	}
}
