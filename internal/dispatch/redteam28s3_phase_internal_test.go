package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRedTeam28S3_PhasePlantsNeverWrittenThrough attacks setPhase's fallback
// (c1b7f6e): with `sandbox: none` the worker writes the stage, so it can force the in-place
// write to refuse (a symlink, a hard link, a long file, a FIFO with a reader, a directory at
// the phase file's name) and, at the same time, plant something at the temporary name the
// fallback writes (".phase": a symlink or a hard link to a file of agora's, a FIFO). The
// victim keeps its bytes, setPhase returns (it never blocks on a FIFO), and, where the name
// can hold a file again, the phase reads back.
func TestRedTeam28S3_PhasePlantsNeverWrittenThrough(t *testing.T) {
	forces := []string{"symlink", "hardlink", "long", "fifo-with-reader", "dir"}
	temps := []string{"none", "symlink", "hardlink", "fifo", "dangling-symlink"}
	for _, force := range forces {
		for _, temp := range temps {
			t.Run(force+"+tmp-"+temp, func(t *testing.T) {
				d := &Dispatcher{StateDir: t.TempDir()}
				id := "01JXXXXXXXXXXXXXXXXXXXXXXX"
				st := stageAt(d.StateDir, id)
				if err := os.MkdirAll(st.dir, 0o700); err != nil {
					t.Fatal(err)
				}
				victimDir := t.TempDir()
				victim := filepath.Join(victimDir, "victim")
				const own = "agora's own\n"
				if err := os.WriteFile(victim, []byte(own), 0o600); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(st.dir, phaseFile)
				tmp := filepath.Join(st.dir, "."+phaseFile)
				must := func(err error) {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
				}
				switch force {
				case "symlink":
					must(os.Symlink(victim, path))
				case "hardlink":
					must(os.Link(victim, path))
				case "long":
					must(os.WriteFile(path, []byte(strings.Repeat("x", phaseWidth+1)), 0o600))
				case "fifo-with-reader":
					must(syscall.Mkfifo(path, 0o600))
					r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
					must(err)
					t.Cleanup(func() { r.Close() })
				case "dir":
					must(os.Mkdir(path, 0o700))
				}
				dangling := filepath.Join(victimDir, "created-by-agora")
				switch temp {
				case "symlink":
					must(os.Symlink(victim, tmp))
				case "hardlink":
					must(os.Link(victim, tmp))
				case "fifo":
					must(syscall.Mkfifo(tmp, 0o600))
				case "dangling-symlink":
					must(os.Symlink(dangling, tmp))
				}
				done := make(chan struct{})
				go func() { st.setPhase(PhaseAgent); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					// Unblock it (a writer on a FIFO waits for a reader) before failing.
					if f, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
						defer f.Close()
					}
					t.Fatalf("setPhase blocked on the planted %s / %s", force, temp)
				}
				if b, _ := os.ReadFile(victim); string(b) != own {
					t.Errorf("victim now holds %q: setPhase wrote through the planted %s (phase) / %s (.phase)", b, force, temp)
				}
				if _, err := os.Lstat(dangling); err == nil {
					t.Errorf("setPhase created %s through the dangling symlink planted at .phase", dangling)
				}
				if force == "dir" {
					return // a directory at the name holds no phase; the display shows none
				}
				if l := d.Live(id); l.Phase != PhaseAgent {
					t.Errorf("phase %q after the plant, want %q", l.Phase, PhaseAgent)
				}
			})
		}
	}
}
