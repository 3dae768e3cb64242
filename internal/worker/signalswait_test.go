package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestSteps_NoProcessBeforeTheSignalsAreDropped: Main drops the signals beside verify; the
// steps after verify, the first that may start a process in the sandbox (a setup script, git,
// the agent), wait for it. When the worker reaches the wait the agent has not run and no
// result is written; once the wait returns the agent runs.
func TestSteps_NoProcessBeforeTheSignalsAreDropped(t *testing.T) {
	f := newFixture(t, "echo ran > ran")
	f.write()
	reached, release := make(chan struct{}), make(chan struct{})
	done := make(chan int, 1)
	await := func() {
		close(reached)
		<-release
	}
	go func() {
		done <- run(t.Context(), options{Root: f.root, TempDir: f.tmp, awaitSignals: await})
	}()
	select {
	case <-reached:
	case code := <-done:
		t.Fatalf("the worker ended (exit %d) without waiting for the signal drop", code)
	}
	if exists(filepath.Join(f.root, wire.WorkspaceDir, "ran")) {
		t.Fatal("the agent ran before the worker dropped the signals")
	}
	if exists(f.outPath(wire.ResultFile)) {
		t.Fatal("the worker wrote its result before the wait")
	}
	close(release)
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(filepath.Join(f.root, wire.WorkspaceDir, "ran"))
	if err != nil || string(b) != "ran\n" {
		t.Fatalf("the agent did not run once the drop was done: %q %v", b, err)
	}
}

// TestSteps_VerifyRunsBeforeTheWait: the wait is after verify, so the drop goes on beside
// it: a bundle verify refuses ends the run without the wait.
func TestSteps_VerifyRunsBeforeTheWait(t *testing.T) {
	f := newFixture(t, "true")
	f.write()
	if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.ManifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	waited := false
	if code := run(t.Context(), options{Root: f.root, TempDir: f.tmp, awaitSignals: func() { waited = true }}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	res, err := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != wire.StatusFailed || waited {
		t.Errorf("a refused bundle: status %s, waited %v; want failed without the wait (verify comes first)", res.Status, waited)
	}
}
