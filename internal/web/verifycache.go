package web

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/orch/api"
)

// A sealed run's bundle accepts no later entry, so its verification is kept: a page load
// does not export and check a large bundle again. It is redone after verifyTTL all the same,
// so tampering with the databases afterwards shows within that time.
const (
	verifyTTL = 10 * time.Minute
	// verifyWait is how long a page waits for a verification before it says it is still
	// running: a small run's is done by then; a large bundle's takes seconds, which no
	// page waits for (reload to see it).
	verifyWait    = 100 * time.Millisecond
	verifyTimeout = 5 * time.Minute
	maxVerified   = 128
)

type verifyView struct {
	OK      bool
	Pending bool
	Tier    string
	// Reason is the first failed check (or the error that stopped the export), as
	// `agora verify` prints it.
	Reason string
	Lines  []string
	At     time.Time
}

type verifyEntry struct {
	done chan struct{}
	view verifyView
}

// verifyCache runs one verification at a time (a large bundle's export and check take a
// core for seconds, which readers must not take from the engine twice over) and keeps each
// run's latest.
type verifyCache struct {
	verify func(ctx context.Context, run api.Run) (*verify.Report, error)
	now    func() time.Time
	slot   chan struct{}
	mu     sync.Mutex
	runs   map[string]*verifyEntry
}

func newVerifyCache(v func(context.Context, api.Run) (*verify.Report, error), now func() time.Time) *verifyCache {
	return &verifyCache{verify: v, now: now, slot: make(chan struct{}, 1), runs: map[string]*verifyEntry{}}
}

// get returns run's verification, starting one when none is kept or the kept one is older
// than verifyTTL. The request that starts it waits for it at most wait; one that finds it
// running does not wait at all. The verification goes on without the request: a page that
// gave up finds it done on the next load.
func (c *verifyCache) get(ctx context.Context, run api.Run, wait time.Duration) verifyView {
	c.mu.Lock()
	e := c.runs[run.ID]
	if e != nil {
		select {
		case <-e.done:
			if c.now().Sub(e.view.At) > verifyTTL {
				e = nil
			}
		default:
			wait = 0
		}
	}
	if e == nil {
		c.evict()
		e = &verifyEntry{done: make(chan struct{})}
		c.runs[run.ID] = e
		go c.run(context.WithoutCancel(ctx), run, e)
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.done:
		return e.view
	default:
	}
	select {
	case <-e.done:
		return e.view
	case <-t.C:
		return verifyView{Pending: true}
	case <-ctx.Done():
		return verifyView{Pending: true}
	}
}

func (c *verifyCache) run(ctx context.Context, run api.Run, e *verifyEntry) {
	defer close(e.done)
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	select {
	case c.slot <- struct{}{}:
		defer func() { <-c.slot }()
	case <-ctx.Done():
		e.view = verifyView{Reason: "the run bundle was not verified: other verifications took too long", At: c.now()}
		return
	}
	rep, err := c.verify(ctx, run)
	e.view = reportView(rep, err)
	e.view.At = c.now()
}

// evict drops finished entries, oldest first, until there is room for one more. c.mu is held.
func (c *verifyCache) evict() {
	for len(c.runs) >= maxVerified {
		oldest := ""
		for id, e := range c.runs {
			select {
			case <-e.done:
				if oldest == "" || e.view.At.Before(c.runs[oldest].view.At) {
					oldest = id
				}
			default:
			}
		}
		if oldest == "" {
			return // all running: the map is bounded by the runs people look at at once
		}
		delete(c.runs, oldest)
	}
}

// reportView says what `agora verify` of the bundle says: one line per check, the tier, and
// the first failure as the reason.
func reportView(rep *verify.Report, err error) verifyView {
	if err != nil {
		return verifyView{Reason: fmt.Sprintf("the run bundle could not be exported: %v", err)}
	}
	v := verifyView{OK: rep.OK && len(rep.Failed()) == 0, Tier: rep.Tier}
	for _, c := range rep.Checks {
		res := "pass"
		if !c.OK {
			res = "FAIL"
		}
		line := strings.TrimSpace(res + " " + strings.TrimSpace(c.Check+" "+c.Item) + ": " + c.Detail)
		v.Lines = append(v.Lines, line)
		if !c.OK && v.Reason == "" {
			v.Reason = strings.TrimSpace(c.Check+" "+c.Item) + ": " + c.Detail
		}
	}
	if !v.OK && v.Reason == "" {
		v.Reason = "no check passed"
	}
	return v
}
