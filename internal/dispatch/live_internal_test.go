package dispatch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// TestLive_Untrusted: a phase file holding anything but a known phase (with sandbox: none
// the worker can write the stage) is not believed, and a huge log is read from its tail only.
func TestLive_Untrusted(t *testing.T) {
	d := &Dispatcher{StateDir: t.TempDir()}
	id := "01JXXXXXXXXXXXXXXXXXXXXXXX"
	dir := filepath.Join(d.StateDir, id)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, phaseFile), []byte("\x1b[2Jpwned\n"), 0o600)
	big := strings.Repeat("x", 1<<20) + "\nthe end\n"
	os.WriteFile(filepath.Join(dir, stdoutLog), []byte(big), 0o600)
	l := d.Live(id)
	if l.Phase != "" || !l.PhaseSince.IsZero() {
		t.Errorf("phase %q believed", l.Phase)
	}
	if l.LastLine != "the end" {
		t.Errorf("last line %q, want %q", l.LastLine, "the end")
	}
	stageAt(d.StateDir, id).setPhase(PhaseAgent)
	if l := d.Live(id); l.Phase != PhaseAgent {
		t.Errorf("phase %q, want agent", l.Phase)
	}
	for _, unknown := range []string{"01JYYYYYYYYYYYYYYYYYYYYYYY", "../" + id, ".", ""} {
		if l := d.Live(unknown); !reflect.DeepEqual(l, Live{}) {
			t.Errorf("dispatch %q: %+v, want nothing", unknown, l)
		}
	}
	// The tails the web view shows: capped, and a link planted as a log is not followed.
	os.Symlink("/etc/passwd", filepath.Join(dir, stderrLog))
	l = d.Live(id)
	if !strings.HasSuffix(string(l.Stdout), "the end\n") || len(l.Stdout) != liveTail {
		t.Errorf("stdout tail of %d bytes ending %q, want the last %d", len(l.Stdout), l.Stdout[max(len(l.Stdout)-20, 0):], liveTail)
	}
	if len(l.Stderr) != 0 {
		t.Errorf("a symlinked stderr log was read: %.40q", l.Stderr)
	}
}

// TestSetPhase_InPlace: each phase overwrites the last in place, a shorter name
// after a longer one included, and Live reads each back with its time.
func TestSetPhase_InPlace(t *testing.T) {
	d := &Dispatcher{StateDir: t.TempDir()}
	id := "01JXXXXXXXXXXXXXXXXXXXXXXX"
	st := stageAt(d.StateDir, id)
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(st.dir, phaseFile)
	var ino uint64
	for i, p := range []string{PhaseStaging, PhaseSandbox, PhaseAgent, PhaseCapture, PhaseAgent, PhaseVerify} {
		st.setPhase(p)
		if l := d.Live(id); l.Phase != p || l.PhaseSince.IsZero() {
			t.Fatalf("after setPhase(%q): Live has %q since %v", p, l.Phase, l.PhaseSince)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != phaseWidth || fi.Mode().Perm() != 0o600 {
			t.Errorf("phase file %d bytes, mode %v; want %d, 0600", fi.Size(), fi.Mode().Perm(), phaseWidth)
		}
		n := fi.Sys().(*syscall.Stat_t).Ino
		if i > 0 && n != ino {
			t.Errorf("setPhase(%q) replaced the file (inode %d -> %d), want it written in place", p, ino, n)
		}
		ino = n
	}
}

// The attack on the in-place write: with `sandbox: none` the worker can write the stage, so
// it plants at the phase file's name a hard link to, or a symlink at, a file of agora's, or
// a long file. setPhase must never write through either (the file keeps its bytes) and the
// phase still reads back.
func TestSetPhase_NeverWritesThroughAPlant(t *testing.T) {
	for _, plant := range []string{"hardlink", "symlink", "long"} {
		t.Run(plant, func(t *testing.T) {
			d := &Dispatcher{StateDir: t.TempDir()}
			id := "01JXXXXXXXXXXXXXXXXXXXXXXX"
			st := stageAt(d.StateDir, id)
			if err := os.MkdirAll(st.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("agora's own\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(st.dir, phaseFile)
			var err error
			switch plant {
			case "hardlink":
				err = os.Link(victim, path)
			case "symlink":
				err = os.Symlink(victim, path)
			case "long":
				err = os.WriteFile(path, []byte(strings.Repeat("x", phaseWidth+1)), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			st.setPhase(PhaseAgent)
			if b, _ := os.ReadFile(victim); string(b) != "agora's own\n" {
				t.Errorf("victim now holds %q: written through the planted %s", b, plant)
			}
			if l := d.Live(id); l.Phase != PhaseAgent {
				t.Errorf("phase %q after the plant, want %q", l.Phase, PhaseAgent)
			}
		})
	}
}

// BenchmarkSetPhase: a phase written in place against the temporary file renamed over the
// last (what setPhase does for a planted file), in the stage
// of a dispatch under the test's TMPDIR (ext4 on the machine of docs/BENCHMARKS.md).
//
//	go test ./internal/dispatch -run '^$' -bench SetPhase -benchmem
func BenchmarkSetPhase(b *testing.B) {
	phases := []string{PhaseStaging, PhaseSandbox, PhaseAgent, PhaseCapture}
	for _, bb := range []struct {
		name string
		set  func(*stage, string)
	}{{"in-place", (*stage).setPhase}, {"rename", (*stage).renamePhase}} {
		b.Run(bb.name, func(b *testing.B) {
			st := stageAt(b.TempDir(), "01JXXXXXXXXXXXXXXXXXXXXXXX")
			if err := os.MkdirAll(st.dir, 0o700); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				bb.set(st, phases[i%len(phases)])
				i++
			}
		})
	}
}
