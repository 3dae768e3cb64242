package dispatch

// Attacks on the stage files made beside the staging (makeFiles, madeFiles): with `sandbox:
// none` the worker and the agent write the stage directory, so each of the three names may
// hold something planted before the supervisor makes it (a symlink, dangling or not, a hard
// link to a file of agora's, a FIFO with or without a reader, a socket, a device node when
// the tests run with CAP_MKNOD, a directory, a file of the planter's), or be swapped while
// it does. The supervisor writes through none of them, never blocks, never lets the first
// phase overwrite a later one, and a dispatch that fails during staging leaves no phase
// file behind its cleanup.

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// r47fID is the stage's dispatch id.
const r47fID = "01JXXXXXXXXXXXXXXXXXXXXXXX"

// r47fStage is a stage directory under a fresh state directory, and the Dispatcher that
// reads it.
func r47fStage(t *testing.T) (*stage, *Dispatcher) {
	t.Helper()
	d := &Dispatcher{StateDir: t.TempDir()}
	st := stageAt(d.StateDir, r47fID)
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return st, d
}

// r47fOneProc runs the rest of the test on one P: a goroutine started by the test runs only
// when the test's goroutine blocks, so a step that does not wait for makeFiles runs before
// it, every time.
func r47fOneProc(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// r47fWithin runs f and fails the test when it has not returned within a minute (it blocks);
// unblock is called then, to let f's goroutine end before the test does.
func r47fWithin(t *testing.T, what string, f, unblock func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		if unblock != nil {
			unblock()
		}
		<-done
		t.Fatalf("%s blocked", what)
	}
}

// r47fPlant plants kind at p; victim is a file of agora's outside the stage, dangling the
// name a dangling symlink points to. It returns what unblocks a writer waiting on a planted
// FIFO and, for a FIFO with a reader, that reader.
func r47fPlant(t *testing.T, kind, p, victim, dangling string) (unblock func(), reader *os.File) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	unblock = func() {
		if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			t.Cleanup(func() { f.Close() })
		}
	}
	switch kind {
	case "symlink":
		must(os.Symlink(victim, p))
	case "dangling-symlink":
		must(os.Symlink(dangling, p))
	case "hardlink":
		must(os.Link(victim, p))
	case "fifo":
		must(syscall.Mkfifo(p, 0o600))
	case "fifo-with-reader":
		must(syscall.Mkfifo(p, 0o600))
		r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		must(err)
		t.Cleanup(func() { r.Close() })
		reader = r
	case "socket":
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Skipf("SKIP: no unix socket at %s: %v", p, err)
		}
		t.Cleanup(func() { l.Close() })
	case "chardev":
		// /dev/null's numbers: a device the supervisor must not write to, harmless if it does.
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|3); err != nil {
			t.Skipf("SKIP: no device node at %s (mknod needs CAP_MKNOD): %v", p, err)
		}
	case "dir":
		must(os.Mkdir(p, 0o700))
	case "long-file":
		must(os.WriteFile(p, []byte(strings.Repeat("staging ", 8)+"\n"), 0o644))
	case "short-file":
		must(os.WriteFile(p, []byte("capture\n"), 0o644))
	default:
		t.Fatalf("unknown plant %q", kind)
	}
	return unblock, reader
}

var r47fKinds = []string{"symlink", "dangling-symlink", "hardlink", "fifo", "fifo-with-reader", "socket", "chardev", "dir", "long-file", "short-file"}

// TestRedTeam47f_MakeFilesPlants: each name of the three, holding each kind of plant before
// makeFiles runs. The victim keeps its bytes, nothing is made through a dangling link, a
// FIFO's reader reads nothing, makeFiles and the next setPhase return, the other two files
// are made as usual, and the phase reads back wherever the name can hold a file.
func TestRedTeam47f_MakeFilesPlants(t *testing.T) {
	for _, name := range []string{phaseFile, stdoutLog, stderrLog} {
		for _, kind := range r47fKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				st, d := r47fStage(t)
				outside := t.TempDir()
				victim, dangling := filepath.Join(outside, "victim"), filepath.Join(outside, "made-by-agora")
				const own = "agora's own\n"
				if err := os.WriteFile(victim, []byte(own), 0o600); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(st.dir, name)
				unblock, reader := r47fPlant(t, kind, p, victim, dangling)

				r47fWithin(t, "makeFiles", func() { st.makeFilesBeside(PhaseStaging); st.madeFiles() }, unblock)
				phaseHolds := name != phaseFile || kind != "dir"
				if l := d.Live(r47fID); phaseHolds && l.Phase != PhaseStaging {
					t.Errorf("phase %q after makeFiles, want %q", l.Phase, PhaseStaging)
				}
				r47fWithin(t, "setPhase", func() { st.setPhase(PhaseSandbox) }, unblock)
				if l := d.Live(r47fID); phaseHolds && l.Phase != PhaseSandbox {
					t.Errorf("phase %q after setPhase, want %q", l.Phase, PhaseSandbox)
				}

				if b, err := os.ReadFile(victim); err != nil || string(b) != own {
					t.Errorf("the victim holds %q (%v): written through the planted %s at %s", b, err, kind, name)
				}
				if _, err := os.Lstat(dangling); err == nil {
					t.Errorf("%s made through the dangling symlink at %s", dangling, name)
				}
				if reader != nil {
					buf := make([]byte, 64)
					if n, _ := reader.Read(buf); n > 0 {
						t.Errorf("the FIFO at %s was written: %q", name, buf[:n])
					}
				}
				for _, other := range []string{stdoutLog, stderrLog} {
					if other == name {
						continue
					}
					fi, err := os.Lstat(filepath.Join(st.dir, other))
					if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
						t.Errorf("%s beside the plant: %v %v, want an empty private file", other, fi, err)
					}
				}
			})
		}
	}
}

// r47fRace runs makeFiles and setPhase on fresh stages, rounds times, while swap renames a
// plant over the phase file's name again and again, and fails when victim changes.
func r47fRace(t *testing.T, rounds int, victim string, swap func(p string, j int)) {
	t.Helper()
	own, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		st, _ := r47fStage(t)
		p := filepath.Join(st.dir, phaseFile)
		stop := make(chan struct{})
		var planter sync.WaitGroup
		planter.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				swap(p, j)
			}
		})
		r47fWithin(t, "makeFiles and setPhase beside a planter", func() {
			st.makeFilesBeside(PhaseStaging)
			for _, phase := range r47fOrder[1:] {
				st.setPhase(phase)
			}
			st.madeFiles()
		}, func() {
			close(stop)
			for range 100 {
				if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					defer f.Close()
				}
			}
		})
		select {
		case <-stop:
		default:
			close(stop)
		}
		planter.Wait()
		if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, own) {
			t.Fatalf("round %d: the victim holds %q (%v), was %q", i, b, err, own)
		}
	}
}

// TestRedTeam47f_MakeFilesRacingPlanter: a planter swaps the phase file's name between a
// symlink to the victim, a hard link to it, a FIFO and a directory, by renames, while
// makeFiles and every later setPhase run. The victim (longer than a phase line) keeps its
// bytes and neither blocks.
func TestRedTeam47f_MakeFilesRacingPlanter(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("agora's own file, longer than a phase line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r47fRace(t, 200, victim, func(p string, j int) {
		spare := filepath.Join(filepath.Dir(p), "spare")
		os.RemoveAll(spare)
		switch j % 4 {
		case 0:
			_ = os.Symlink(victim, spare)
		case 1:
			_ = os.Link(victim, spare)
		case 2:
			_ = syscall.Mkfifo(spare, 0o600)
		case 3:
			_ = os.Mkdir(spare, 0o700)
		}
		_ = os.Rename(spare, p)
	})
}

// TestRedTeam47f_PhaseHardLinkDropped: a planter hard-links a short file of agora's at the
// phase file's name and renames a file of its own over it at once, so that a file opened by
// the name is the victim and, by the time its link count is read, has one link again.
// setPhase writes only into the phase file the stage made and holds open, never into one it
// opens by name: the victim keeps its bytes through 30,000 phases (a link count checked
// after the open let the planter win after 2,913, 5,051 and 69,750).
func TestRedTeam47f_PhaseHardLinkDropped(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	const own = "agora's own\n"
	if err := os.WriteFile(victim, []byte(own), 0o600); err != nil {
		t.Fatal(err)
	}
	st, _ := r47fStage(t)
	p := filepath.Join(st.dir, phaseFile)
	link, mine := filepath.Join(st.dir, "link"), filepath.Join(st.dir, "mine")
	stop := make(chan struct{})
	var planter sync.WaitGroup
	planter.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Link(victim, link)
			_ = os.WriteFile(mine, nil, 0o600)
			_ = os.Rename(link, p) // the victim at the phase file's name, two links
			_ = os.Rename(mine, p) // and gone from it: one link again
		}
	})
	defer func() { close(stop); planter.Wait() }()
	st.makeFilesBeside(PhaseStaging)
	for i := range 30_000 {
		st.setPhase(r47fOrder[i%len(r47fOrder)])
		if b, err := os.ReadFile(victim); err != nil || string(b) != own {
			t.Fatalf("after %d phases the victim holds %q (%v)", i+1, b, err)
		}
	}
}

// TestRedTeam47f_FirstPhaseNeverOvertakes: on one P, makeFiles has not run when the next
// phase is set: setPhase waits for it, and the file holds the later phase, every time. With
// a file planted at the name (makeFiles then writes the phase through setPhaseNow) too.
func TestRedTeam47f_FirstPhaseNeverOvertakes(t *testing.T) {
	r47fOneProc(t)
	for _, plant := range []string{"", "short-file", "symlink", "dir"} {
		for range 20 {
			st, d := r47fStage(t)
			if plant != "" {
				r47fPlant(t, plant, filepath.Join(st.dir, phaseFile), filepath.Join(t.TempDir(), "v"), filepath.Join(t.TempDir(), "d"))
			}
			st.makeFilesBeside(PhaseStaging)
			st.setPhase(PhaseSandbox)
			st.madeFiles()
			if plant == "dir" {
				continue // no phase reads back from a directory; the order is the others'
			}
			if b, _ := os.ReadFile(filepath.Join(st.dir, phaseFile)); !bytes.Equal(bytes.TrimSpace(b), []byte(PhaseSandbox)) {
				t.Fatalf("plant %q: phase file %q after the sandbox phase, want %q", plant, b, PhaseSandbox)
			}
			if l := d.Live(r47fID); l.Phase != PhaseSandbox {
				t.Fatalf("plant %q: Live phase %q, want %q", plant, l.Phase, PhaseSandbox)
			}
		}
	}
}

// TestRedTeam47f_FailedStagingCleanup: a dispatch that fails during staging, before
// openLogs, is cleaned up while makeFiles may still run: cleanup's removeWork waits for it,
// so no phase file is made after the stage's work is gone (Live would show an ended dispatch
// staging) and the logs are there when cleanup returns. On one P and on all of them.
func TestRedTeam47f_FailedStagingCleanup(t *testing.T) {
	check := func(t *testing.T) {
		for i := range 50 {
			st, d := r47fStage(t)
			s := &supervision{d: d, st: st}
			st.makeFilesBeside(PhaseStaging)
			s.cleanup()
			if _, err := os.Lstat(filepath.Join(st.dir, phaseFile)); err == nil {
				t.Fatalf("round %d: a phase file after cleanup", i)
			}
			if l := d.Live(r47fID); l.Phase != "" {
				t.Fatalf("round %d: Live phase %q after cleanup, want none", i, l.Phase)
			}
			for _, p := range []string{st.stdout, st.stderr} {
				if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("round %d: %s after cleanup: %v %v", i, filepath.Base(p), fi, err)
				}
			}
			// makeFiles has ended: a later removeWork (Reap's) finds nothing it made again.
			stageAt(d.StateDir, r47fID).removeWork()
			if _, err := os.Lstat(filepath.Join(st.dir, phaseFile)); err == nil {
				t.Fatalf("round %d: a phase file after a second removeWork", i)
			}
		}
	}
	t.Run("one-P", func(t *testing.T) { r47fOneProc(t); check(t) })
	t.Run("all-P", check)
}

// TestRedTeam47f_OpenLogsAfterMakeFiles: openLogs waits for makeFiles, then the sinks write
// the logs makeFiles made; Live reads their tails and the phase.
func TestRedTeam47f_OpenLogsAfterMakeFiles(t *testing.T) {
	r47fOneProc(t)
	st, d := r47fStage(t)
	s := &supervision{d: d, st: st, r: &Record{}, red: redact.New(nil)}
	st.makeFilesBeside(PhaseStaging)
	if err := s.openLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.stdout.Write([]byte("out line\n"))
	s.stderr.Write([]byte("err line\n"))
	s.closeLogs()
	l := d.Live(r47fID)
	if l.Phase != PhaseStaging || string(l.Stdout) != "out line\n" || string(l.Stderr) != "err line\n" {
		t.Errorf("Live: phase %q stdout %q stderr %q", l.Phase, l.Stdout, l.Stderr)
	}
}

// TestRedTeam47f_MakeFilesStageGone: a stage directory removed before makeFiles runs (a reap
// of a supervisor taken for dead) is not made again, and makeFiles returns.
func TestRedTeam47f_MakeFilesStageGone(t *testing.T) {
	st, _ := r47fStage(t)
	if err := os.RemoveAll(st.dir); err != nil {
		t.Fatal(err)
	}
	r47fWithin(t, "makeFiles", func() { st.makeFilesBeside(PhaseStaging); st.madeFiles(); st.setPhase(PhaseSandbox) }, nil)
	if _, err := os.Lstat(st.dir); err == nil {
		t.Error("the removed stage directory was made again")
	}
}

// r47fOrder is the host phases in the order a dispatch enters them.
var r47fOrder = []string{PhaseStaging, PhaseSandbox, PhaseAgent, PhaseCapture, PhaseVerify}

// TestRedTeam47f_LiveReadersSeePhasesInOrder: readers calling Live while makeFiles and
// each later phase are written see only known phases (or none), never one that went back,
// and none once the stage's work is removed.
func TestRedTeam47f_LiveReadersSeePhasesInOrder(t *testing.T) {
	for round := range 20 {
		st, d := r47fStage(t)
		stop := make(chan struct{})
		var readers sync.WaitGroup
		seen := make([][]string, 4)
		for i := range seen {
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if p := d.Live(r47fID).Phase; p != "" && (len(seen[i]) == 0 || seen[i][len(seen[i])-1] != p) {
						seen[i] = append(seen[i], p)
					}
				}
			})
		}
		st.makeFilesBeside(PhaseStaging)
		for _, p := range r47fOrder[1:] {
			st.setPhase(p)
		}
		st.removeWork()
		close(stop)
		readers.Wait()
		for i, s := range seen {
			last := -1
			for _, p := range s {
				at := slices.Index(r47fOrder, p)
				if at < 0 || at < last {
					t.Fatalf("round %d reader %d: phases %q: %q out of order", round, i, s, p)
				}
				last = at
			}
		}
		if l := d.Live(r47fID); l.Phase != "" {
			t.Fatalf("round %d: phase %q after removeWork", round, l.Phase)
		}
	}
}

// TestRedTeam47f_OpenLogsPlantedLog: a log name planted before the supervisor opens its logs
// (makeFiles leaves a name there alone): openLogs writes through none of them and does not
// block: it writes only into a log file the supervisor made itself (createLog, O_EXCL).
func TestRedTeam47f_OpenLogsPlantedLog(t *testing.T) {
	for _, kind := range []string{"symlink", "hardlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			st, d := r47fStage(t)
			victim := filepath.Join(t.TempDir(), "victim")
			const own = "agora's own\n"
			if err := os.WriteFile(victim, []byte(own), 0o600); err != nil {
				t.Fatal(err)
			}
			unblock, _ := r47fPlant(t, kind, st.stdout, victim, "")
			s := &supervision{d: d, st: st, r: &Record{}, red: redact.New(nil)}
			st.makeFilesBeside(PhaseStaging)
			r47fWithin(t, "openLogs", func() {
				if err := s.openLogs(context.Background()); err == nil {
					s.stdout.Write([]byte("agent text\n"))
				}
				s.closeLogs()
			}, unblock)
			if b, err := os.ReadFile(victim); err != nil || string(b) != own {
				t.Errorf("the victim holds %q (%v): openLogs wrote through the planted %s", b, err, kind)
			}
		})
	}
}
