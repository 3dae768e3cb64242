package web

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/orch/api"
)

// errBusy: the reads gate had no turn for a request within readWait.
var errBusy = errors.New("busy: too many pages are being read; try again")

// A run's summary (its counts, total and usage) costs one scan of the run's task and attempt
// rows, so it is kept: a sealed run's for good (it never changes again), an open run's for
// at most the age its reader accepts, computed by one request at a time however many ask.
const (
	maxSummaries = 1024
	// pageFresh is how old an open run's summary a page may show; the live stream brings
	// the page up to date from there.
	pageFresh = 250 * time.Millisecond
	// streamFresh is how old the counts an event stream sends may be.
	streamFresh = time.Second
)

type summaryEntry struct {
	done   chan struct{}
	at     time.Time
	sealed bool
	counts map[string]int
	total  int
	usage  *budget.Usage
	err    error
}

type summaries struct {
	src Runs
	now func() time.Time

	mu sync.Mutex
	// runs are the kept summaries by run id; guarded by mu.
	runs map[string]*summaryEntry
}

func newSummaries(src Runs, now func() time.Time) *summaries {
	return &summaries{src: src, now: now, runs: map[string]*summaryEntry{}}
}

// of returns run (a row as Runs reads it) with its counts, total and usage, no older than
// fresh unless the run is sealed.
func (c *summaries) of(ctx context.Context, run api.Run, fresh time.Duration) (api.Run, error) {
	c.mu.Lock()
	e := c.runs[run.ID]
	if e != nil {
		select {
		case <-e.done:
			if e.err != nil || !e.sealed && c.now().Sub(e.at) > fresh {
				e = nil
			}
		default:
		}
	}
	if e == nil {
		c.evict()
		e = &summaryEntry{done: make(chan struct{}), sealed: run.Sealed}
		c.runs[run.ID] = e
		c.mu.Unlock()
		e.at = c.now()
		e.counts, e.total, e.err = c.src.Counts(ctx, run.ID)
		if e.err == nil {
			e.usage, e.err = c.src.Usage(ctx, run.ID)
		}
		close(e.done)
		if e.err != nil {
			c.forget(run.ID, e)
		}
	} else {
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	if e.err != nil {
		return run, e.err
	}
	run.Counts, run.Total, run.Usage = e.counts, e.total, e.usage
	return run, nil
}

// forget drops run's entry e after it failed, so the next reader tries again.
func (c *summaries) forget(id string, e *summaryEntry) {
	c.mu.Lock()
	if c.runs[id] == e {
		delete(c.runs, id)
	}
	c.mu.Unlock()
}

// invalidate drops run's summary: the next reader computes it (after an action).
func (c *summaries) invalidate(id string) {
	c.mu.Lock()
	delete(c.runs, id)
	c.mu.Unlock()
}

// evict drops the oldest finished entries until there is room for one more. c.mu is held.
func (c *summaries) evict() {
	for len(c.runs) >= maxSummaries {
		oldest := ""
		for id, e := range c.runs {
			select {
			case <-e.done:
				if oldest == "" || e.at.Before(c.runs[oldest].at) {
					oldest = id
				}
			default:
			}
		}
		if oldest == "" {
			return
		}
		delete(c.runs, oldest)
	}
}
