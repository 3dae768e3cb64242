package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/dispatch/logline"
	"github.com/agora-dev/agora/internal/sandboxfs"
)

// Phases of a live dispatch on the host side, in order. [Dispatcher.Supervise] reports each
// to its [Progress] as it begins and writes it to the stage's phase file, so a process that
// does not supervise the dispatch (`agora orch watch`, a detached run) reads it with
// [Dispatcher.Live]. The worker's own finer steps (verify, setup, baseline, runtime, ...) are
// recorded with their durations in [Result.Phases] once it ends.
const (
	PhaseStaging = "staging" // loading pinned content, writing the bundle, checking out the workspace, starting the gateways
	PhaseSandbox = "sandbox" // starting the sandbox
	PhaseAgent   = "agent"   // the worker runs in the sandbox
	PhaseCapture = "capture" // the sandbox exited: collecting the patch, outputs and logs
	// PhaseVerify (gate.go) follows capture for a dispatch with a verify gate.
)

// phaseFile is the stage's file holding the current phase's name.
const phaseFile = "phase"

// liveTail is how much of the end of each live log [Dispatcher.Live] reads: the web view
// shows it, and the last line comes from it.
const liveTail = 8 << 10

// Live is what a live dispatch is doing now, read from its stage directory.
type Live struct {
	// Phase is one of the Phase constants, or "" when the stage has none (not staged yet,
	// ended: its work is removed with the phase file, or supervised by an older agora).
	Phase string `json:"phase,omitempty"`
	// PhaseSince is when Phase began; zero without a phase.
	PhaseSince time.Time `json:"phase_since,omitzero"`
	// LastLine is the last non-empty line the worker wrote to stdout or stderr (the stream
	// written last), redacted as the logs are; text the agent wrote, so a caller printing it
	// to a terminal MUST escape control characters.
	LastLine string `json:"last_line,omitempty"`
	// Stdout and Stderr are the last liveTail bytes of the live logs, redacted as written:
	// the web view's tails (not in JSON, where LastLine says enough). Agent text, as LastLine.
	Stdout []byte `json:"-"`
	Stderr []byte `json:"-"`
}

// phaseWidth is the size of the phase file as setPhase writes it: the name padded with
// spaces and a newline, so each phase overwrites the last in place.
const phaseWidth = 16

// setPhase records that the dispatch staged in s entered phase. It is a display aid: a
// failure to write it changes nothing about the dispatch.
//
// The name is written in place, padded to phaseWidth, into the stage's own phase file: the
// one the stage made and holds open (phaseF), while the name still names it. A temporary
// file renamed over the last one cost ~0.5 ms per phase on ext4, whose rename over a file
// with unwritten data forces its blocks out (auto_da_alloc), five times per dispatch. A
// reader racing the 16-byte write could at worst see a mix of two names, which Live does not
// believe (it shows no phase). A file at the name that the stage did not make is never
// opened (with `sandbox: none` the worker can write the stage: a file opened by name may be
// a link to a file of the host's, and a link count checked after the open passes if the
// link is dropped in between); it is replaced by a rename, which makes the stage's own.
func (s *stage) setPhase(phase string) {
	s.madeFiles() // the first phase's write
	s.setPhaseNow(phase)
}

func (s *stage) setPhaseNow(phase string) {
	if len(phase) < phaseWidth && s.writeOwnPhase(phase) {
		return
	}
	s.renamePhase(phase)
}

// renamePhase replaces the phase file with one holding phase: a temporary file renamed over it,
// which becomes the stage's own (phaseF). The temporary file is a new one of a random name
// (O_EXCL, so no symlink, hard link or FIFO the worker planted at a fixed name is opened):
// this is the path a planted phase file takes, and a fixed ".phase" let the plant's author
// have it truncate and write a file of agora's, create one through a dangling symlink, or
// block on a FIFO.
func (s *stage) renamePhase(phase string) {
	f, err := os.CreateTemp(s.dir, "."+phaseFile+"-*")
	if err != nil {
		return
	}
	line := []byte(phase + "\n")
	if len(phase) < phaseWidth {
		line = phaseLine(phase)
	}
	_, err = f.Write(line)
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(s.dir, phaseFile))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return
	}
	s.closePhase()
	s.phaseF = f
}

// writeOwnPhase writes phase in place into the stage's own phase file, and reports whether
// it did: the file the stage holds open, when the name still names it; without one, a file
// it makes at the name when the name is free (O_EXCL).
func (s *stage) writeOwnPhase(phase string) bool {
	path := filepath.Join(s.dir, phaseFile)
	if s.phaseF == nil {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return false
		}
		s.phaseF = f
	} else if !namesFile(path, s.phaseF) {
		return false
	}
	_, err := s.phaseF.WriteAt(phaseLine(phase), 0)
	return err == nil
}

// namesFile reports whether path (not followed) is the file f holds open. f keeps its
// inode from being reused, so equal device and inode numbers are the same file.
func namesFile(path string, f *os.File) bool {
	var at, own unix.Stat_t
	if unix.Fstatat(unix.AT_FDCWD, path, &at, unix.AT_SYMLINK_NOFOLLOW) != nil || unix.Fstat(int(f.Fd()), &own) != nil {
		return false
	}
	return at.Dev == own.Dev && at.Ino == own.Ino
}

// closePhase lets go of the stage's own phase file.
func (s *stage) closePhase() {
	if s.phaseF != nil {
		s.phaseF.Close()
		s.phaseF = nil
	}
}

// phaseLine is phase as the phase file holds it: padded with spaces to phaseWidth, with a
// newline (phase is shorter than phaseWidth).
func phaseLine(phase string) []byte {
	b := make([]byte, phaseWidth)
	copy(b, phase)
	for i := len(phase); i < phaseWidth-1; i++ {
		b[i] = ' '
	}
	b[phaseWidth-1] = '\n'
	return b
}

// Live reads the phase, the ends of the live logs and the last output line of dispatch id
// from its stage. The stage is written by the supervisor on the host; with `sandbox: none`
// the worker could write there too, so it is read through sandboxfs (no link followed, no
// special or hard-linked file), only the known phase names are believed and every read is
// capped. A dispatch without a stage (not staged yet, or cleaned up) has an empty Live.
func (d *Dispatcher) Live(id string) Live {
	var l Live
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return l
	}
	st := stageAt(d.StateDir, id)
	dir, err := sandboxfs.Open(st.dir)
	if err != nil {
		return l
	}
	defer dir.Close()
	if b, mod, err := dir.Tail(phaseFile, 64); err == nil {
		switch p := strings.TrimSpace(string(b)); p {
		case PhaseStaging, PhaseSandbox, PhaseAgent, PhaseCapture, PhaseVerify:
			l.Phase, l.PhaseSince = p, mod
		}
	}
	var newest time.Time
	for i, name := range []string{stdoutLog, stderrLog} {
		b, mod, err := dir.Tail(name, liveTail)
		if err != nil {
			continue
		}
		if i == 0 {
			l.Stdout = b
		} else {
			l.Stderr = b
		}
		if len(b) == 0 || mod.Before(newest) {
			continue
		}
		if line := logline.Last(b); line != "" {
			l.LastLine, newest = line, mod
		}
	}
	return l
}
