package dispatch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch/standbyclaim"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// A standby supervisor is `agora dispatch supervise --standby TARGET`: a detached
// supervisor started ahead of any dispatch by the serve that holds the target's warm slots,
// with agora.db open and one bubblewrap slot of the target's template started as its own
// child. It waits on a socket its holder passed it at start (fd 3, one end of a socketpair:
// no name in the file system, so nobody but the holder can reach it) for one dispatch id;
// from there it is exactly the cold supervisor (Supervise) with the slot to run in, and the
// work outlives serve as a cold supervisor's does. A standby whose holder goes away before a
// claim (EOF: serve stopped or was killed) kills its slot and exits: no standby of a dead
// holder is ever claimed.
//
// The protocol, one line each way (StandbyReady, then ClaimLine, then the answer):
//
//	standby -> holder: "ready SHAPE\n" once the slot waits, or "failed REASON\n" and exit
//	holder -> standby: "claim ID\n"
//	standby -> holder: "claimed ID\n", then supervises ID; any later line: "refused ...\n"
//	standby -> holder: "cold\n" when the dispatch did not fit the slot (it starts cold)
//	standby -> holder: "ended\n" once the dispatch's terminal state is committed

// StandbyCold is the line a claimed standby sends its holder when the dispatch did not fit
// its slot and started cold.
const StandbyCold = "cold"

// StandbyEnded is the line a claimed standby sends its holder once the finish transaction of
// its dispatch has committed, before it closes agora.db and exits: a holder following the
// record (serve's one-shot hand-off) reads it at once instead of at its next poll. It
// says only "read the record now"; the record is what the holder reports.
const StandbyEnded = "ended"

// maxStandbyLine bounds a line of the standby protocol.
const maxStandbyLine = 256

// readLine reads one line of at most maxStandbyLine bytes, without its newline.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) == maxStandbyLine {
			return "", fmt.Errorf("standby: a line over %d bytes", maxStandbyLine)
		}
		b = append(b, c)
	}
}

// slotCheckEvery is how often a standby checks that its slot's sandbox still waits: a slot
// killed from outside ends its standby, so the holder counts it gone and starts another.
const slotCheckEvery = time.Second

// Standby runs a standby supervisor of target on conn (see above). It returns the claimed
// dispatch's final record, or nil when no dispatch claimed it (the holder went away, or the
// slot died first). Closing conn is the caller's.
//
// stale, when not nil, is asked at the claim whether this process may still run a dispatch
// as a cold supervisor started now would: a standby started before agora.yaml changed (its
// limits, network, uid range) or before the agora binary was replaced would run the dispatch
// under the old ones. A stale standby refuses the claim; the holder starts a cold supervisor.
func (d *Dispatcher) Standby(ctx context.Context, target string, conn io.ReadWriteCloser, stale func() error) (*Record, error) {
	say := func(format string, args ...any) { fmt.Fprintf(conn, format+"\n", args...) }
	t, err := d.Config.Target(target)
	if err != nil {
		say("failed %v", err)
		return nil, err
	}
	p, ok := d.LocalProvider.(compute.WarmProvider)
	if !warmDockerTarget(t) && (!ok || !warmTarget(t)) {
		err := fmt.Errorf("target %q keeps no warm slots on this host", target)
		say("failed %v", err)
		return nil, err
	}
	tmpl, err := readTemplate(d.StateDir, target)
	if err != nil {
		say("failed %v", err)
		return nil, err
	}
	w := &WarmPools{d: d, provider: p, standby: true, tmpl: map[string]compute.Spec{target: tmpl}, extra: map[string]*warmMisses{}, warmers: map[string]compute.Warmer{}}
	var slot *warmSlot
	if warmDockerTarget(t) {
		var stop func()
		slot, stop, err = w.standbyDocker(ctx, target, t)
		if stop != nil {
			defer stop() // after the slot's end (deferred below): the gateway serves it to the last
		}
	} else {
		slot, err = w.fillOnce(ctx, target, t)
	}
	if err != nil {
		say("failed %v", err)
		return nil, err
	}
	w.held, w.heldTarget = slot, target
	defer w.teardowns.Wait() // the claimed slot's, after the end is reported
	defer w.discardHeld()
	d.Warm = w // this process's one slot: the claimed dispatch's prepare takes it
	// The shape the holder claims by is the stored template's (WarmShape), for a docker slot
	// too, whose own key (its warmer's Shape) is what its dispatch's spec is checked against.
	say("ready %s", tmpl.ID)

	// The claim, or the holder's end (EOF, an error), or the slot's death, or ctx.
	lines := make(chan string, 1)
	r := bufio.NewReaderSize(conn, maxStandbyLine+1)
	go func() {
		l, err := readLine(r)
		if err != nil {
			close(lines)
			return
		}
		lines <- l
	}()
	tick := time.NewTicker(slotCheckEvery)
	defer tick.Stop()
	var line string
	for got := false; !got; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if !slot.Alive() {
				return nil, errors.New("standby: the slot's sandbox ended before a claim")
			}
		case l, open := <-lines:
			if !open {
				return nil, nil // the holder is gone: never claimed
			}
			line, got = l, true
		}
	}
	id, err := standbyclaim.Parse(line)
	if err != nil {
		say("refused %v", err)
		return nil, err
	}
	if stale != nil {
		if err := stale(); err != nil {
			say("refused %v", err)
			return nil, err
		}
	}
	say("claimed %s", id)
	// A dispatch that does not fit the slot starts cold in this process: the holder counts it
	// so (StandbyCold), not as a warm claim.
	w.onMiss = func() { say(StandbyCold) }
	// One claim per standby: whatever the holder sends later is answered, never acted on.
	go func() {
		for {
			if _, err := readLine(r); err != nil {
				return
			}
			say("refused standby already claimed")
		}
	}()
	return d.Supervise(ctx, id, func(kind string, _ *Record) {
		if lifecycle.DispatchEnded(kind) {
			say(StandbyEnded) // Supervise calls this after the finish transaction commits
		}
	})
}

// discardHeld kills the held slot if no dispatch took it.
func (w *WarmPools) discardHeld() {
	w.mu.Lock()
	s := w.held
	w.held = nil
	w.mu.Unlock()
	if s != nil {
		s.Discard()
	}
}

// claimHeld takes a standby's one slot for dispatch id of target; nil when it is taken, or
// of another target.
func (w *WarmPools) claimHeld(target, id string) *warmSlot {
	w.mu.Lock()
	s := w.held
	if s == nil || w.heldTarget != target {
		w.mu.Unlock()
		return nil
	}
	w.held = nil
	w.mu.Unlock()
	if err := s.lease.transfer(id); err != nil {
		s.Discard()
		return nil
	}
	return s
}
