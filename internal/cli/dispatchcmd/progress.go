package dispatchcmd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
)

// progressTick is how often a running dispatch's last output line is looked at.
const progressTick = time.Second

// dispatchProgress shows a dispatch being supervised in this process on stderr: its
// lifecycle events always, and, when shown (stderr a terminal, or --progress), each phase as
// it begins and the worker's last output line while it changes. stdout is never touched, so
// -o json stays one document.
type dispatchProgress struct {
	f    *cmdutil.Factory
	d    *dispatch.Dispatcher
	id   string
	show bool

	mu     sync.Mutex // guards the fields below: events and the ticker print from two goroutines
	phase  string
	since  time.Time
	last   string
	closed bool
}

// event is the dispatch's Progress.
func (p *dispatchProgress) event(kind string, r *dispatch.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch kind {
	case dispatch.PhaseStaging, dispatch.PhaseSandbox, dispatch.PhaseAgent, dispatch.PhaseCapture, dispatch.PhaseVerify:
		p.phase, p.since = kind, p.f.Now()
		if p.show {
			fmt.Fprintf(p.f.IO.ErrOut, "agora: %s %s\n", p.id, kind)
		}
		return
	}
	printEvent(p.f, kind, r)
}

// follow prints the last output line each tick while it changes, until ctx ends.
func (p *dispatchProgress) follow(ctx context.Context) {
	if !p.show {
		return
	}
	t := time.NewTicker(progressTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l := p.d.Live(p.id)
		p.mu.Lock()
		if l.LastLine != "" && l.LastLine != p.last && !p.closed {
			p.last = l.LastLine
			elapsed := p.f.Now().Sub(p.since).Round(time.Second)
			fmt.Fprintf(p.f.IO.ErrOut, "agora: %s %s %s | %s\n", p.id, cmdutil.OrDash(p.phase), elapsed, cmdutil.Truncate(cmdutil.AgentText(l.LastLine), 120))
		}
		p.mu.Unlock()
	}
}

// stop ends the printing: nothing follows the summary.
func (p *dispatchProgress) stop() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
