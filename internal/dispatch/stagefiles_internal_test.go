package dispatch

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func newTestStage(t *testing.T) *stage {
	t.Helper()
	st := stageAt(t.TempDir(), "01JXXXXXXXXXXXXXXXXXXXXXXX")
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestMakeFiles: the stage's phase file and logs are made beside the staging: the phase
// file holds the first phase, the logs are empty private files.
func TestMakeFiles(t *testing.T) {
	st := newTestStage(t)
	st.makeFilesBeside(PhaseStaging)
	st.madeFiles()
	if b, err := os.ReadFile(filepath.Join(st.dir, phaseFile)); err != nil || !bytes.Equal(b, phaseLine(PhaseStaging)) {
		t.Errorf("phase file %q (%v), want %q", b, err, phaseLine(PhaseStaging))
	}
	for _, p := range []string{st.stdout, st.stderr} {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", p, fi, err)
		}
	}
	if l := (&Dispatcher{StateDir: filepath.Dir(st.dir)}).Live(filepath.Base(st.dir)); l.Phase != PhaseStaging {
		t.Errorf("Live: phase %q, want %q", l.Phase, PhaseStaging)
	}
}

// TestMakeFiles_NeverOvertakesALaterPhase: a phase set right after the files are begun is
// the one the file keeps.
func TestMakeFiles_NeverOvertakesALaterPhase(t *testing.T) {
	for range 50 {
		st := newTestStage(t)
		st.makeFilesBeside(PhaseStaging)
		st.setPhase(PhaseSandbox)
		st.madeFiles()
		if b, _ := os.ReadFile(filepath.Join(st.dir, phaseFile)); !bytes.Equal(b, phaseLine(PhaseSandbox)) {
			t.Fatalf("phase file %q after the sandbox phase, want %q", b, phaseLine(PhaseSandbox))
		}
	}
}

// TestMakeFiles_FollowsNothing: names planted in the stage (with `sandbox: none` the worker
// can write it) are neither followed nor written through: a log's link keeps its target
// untouched, and a planted phase file is replaced by the stage's own.
func TestMakeFiles_FollowsNothing(t *testing.T) {
	st := newTestStage(t)
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{st.stdout, st.stderr, filepath.Join(st.dir, phaseFile)} {
		if err := os.Symlink(outside, p); err != nil {
			t.Fatal(err)
		}
	}
	st.makeFilesBeside(PhaseStaging)
	st.madeFiles()
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Errorf("the link's target: %q (%v), want it untouched", b, err)
	}
	fi, err := os.Lstat(filepath.Join(st.dir, phaseFile))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("phase file: %v %v, want a regular file of the stage's", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(st.dir, phaseFile)); string(bytes.TrimSpace(b)) != PhaseStaging {
		t.Errorf("phase file %q, want %q", b, PhaseStaging)
	}
}
