package modelgw

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// A sandbox must not be able to turn the audit log into a weapon: 32
// threads once wrote 49,000 entries in 20 s by asking for routes that do not exist. Two
// things bound what the gateway writes. Refusals the sandbox can provoke at will are counted
// (tally) and written once per interval and reason, never once per request. And every entry
// the gateway writes, the worker's tool.call reports included, is charged to a per-dispatch
// budget (auditBudget); when it is spent one final entry says so, the gateway refuses every
// further request without an entry, and [Config.OnLimit] ends the dispatch.

// Reasons a counted refusal is recorded under. Each is a fixed word, never text from the
// request, so a flood cannot make the keys (or the entries) many.
const (
	tallyBadRequest = "bad-request"        // 400: malformed body, header or report
	tallyNoRoute    = "no-route"           // 404: no such route, or not for this dispatch
	tallyMethod     = "method-not-allowed" // 405
	tallyTooLarge   = "too-large"          // 413: request body over its cap
	tallyRateLimit  = "rate-limited"       // 429
	tallyBusy       = "busy"               // 503: too many requests in flight
	tallyClosing    = "closing"            // 503: the gateway is shutting down
)

// tallyByStatus maps the refusals a handler answers through [Gateway.fail] to their counted
// reason; any other status keeps its own entry.
var tallyByStatus = map[int]string{
	http.StatusBadRequest:            tallyBadRequest,
	http.StatusNotFound:              tallyNoRoute,
	http.StatusMethodNotAllowed:      tallyMethod,
	http.StatusRequestEntityTooLarge: tallyTooLarge,
	http.StatusTooManyRequests:       tallyRateLimit,
}

// finalEntryReserve is kept free in the byte budget for the entry saying it is spent, which
// holds only the dispatch, the role and a few numbers.
const finalEntryReserve = 1 << 10

// errBudgetSpent is returned by the budget's Record once the budget is spent: the entry was
// not kept.
var errBudgetSpent = errors.New("the dispatch's audit budget is spent")

// tallyKey is what refusals are counted by: the route (a fixed name from routeOf) and a
// tally reason.
type tallyKey struct{ route, reason string }

// tallyCount is one key's refusals since the last flush.
type tallyCount struct {
	status      int
	count       int64
	first, last time.Time
}

// tally counts refusals between flushes.
type tally struct {
	mu     sync.Mutex
	counts map[tallyKey]*tallyCount // guarded by mu
	closed bool                     // guarded by mu; set by the last flush, after which nothing is counted
}

// add counts one refusal.
func (t *tally) add(route, reason string, status int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return // after the last flush: the dispatch's audit is complete
	}
	if t.counts == nil {
		t.counts = make(map[tallyKey]*tallyCount)
	}
	k := tallyKey{route, reason}
	c := t.counts[k]
	if c == nil {
		c = &tallyCount{status: status, first: now}
		t.counts[k] = c
	}
	c.count++
	c.last = now
}

// take returns the counts since the last take, in a fixed order, and starts afresh; last
// closes the tally.
func (t *tally) take(last bool) []tallyEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = t.closed || last
	out := make([]tallyEntry, 0, len(t.counts))
	for k, c := range t.counts {
		out = append(out, tallyEntry{k, *c})
	}
	clear(t.counts)
	slices.SortFunc(out, func(a, b tallyEntry) int {
		return cmp.Or(cmp.Compare(a.route, b.route), cmp.Compare(a.reason, b.reason))
	})
	return out
}

type tallyEntry struct {
	tallyKey
	tallyCount
}

// flushRefusals writes one [entry.ToolGatewayRefused] entry for each route and reason refused since
// the last flush; last stops the counting.
func (g *Gateway) flushRefusals(ctx context.Context, last bool) {
	for _, e := range g.tally.take(last) {
		// An entry not kept (the budget spent, the log down) has nowhere else to go.
		_ = g.audit.Record(ctx, entry.ToolGatewayRefused, map[string]any{
			"dispatch":        g.dispatchID,
			"role":            g.role,
			entry.KeyRoute:    e.route,
			entry.KeyReason:   e.reason,
			"status":          e.status,
			entry.KeyDecision: decisionDenied,
			entry.KeyCount:    e.count,
			"first":           e.first.UTC().Format(time.RFC3339Nano),
			"last":            e.last.UTC().Format(time.RFC3339Nano),
		})
	}
}

// flushLoop flushes the tally every interval until stop is closed; Close does the last flush.
func (g *Gateway) flushLoop(ctx context.Context, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			g.flushRefusals(ctx, false)
		case <-stop:
			return
		}
	}
}

// auditBudget is the gateway's [Auditor]: it charges every entry to the dispatch's budget
// before handing it on, and once the budget is spent writes the one final entry, calls
// onLimit and keeps nothing more.
type auditBudget struct {
	inner                Auditor
	dispatchID, role     string
	maxEntries, maxBytes int64
	onLimit              func(detail string)

	// order makes the final entry the last: records in flight hold it shared, taken while
	// mu is held so none can start after the budget is spent; the final entry takes it
	// exclusively.
	order sync.RWMutex

	mu      sync.Mutex
	entries int64 // guarded by mu: entries kept, the final one excluded
	bytes   int64 // guarded by mu: their size (see entrySize)
	isSpent bool  // guarded by mu
}

// Record keeps the entry if the budget allows it and the final entry otherwise.
func (b *auditBudget) Record(ctx context.Context, kind string, details map[string]any) error {
	size := entrySize(kind, details)
	b.mu.Lock()
	if b.isSpent {
		b.mu.Unlock()
		return errBudgetSpent
	}
	// One entry is always left for the final one, in number and in bytes.
	overEntries := b.entries+1 >= b.maxEntries
	if overEntries || b.bytes+size > b.maxBytes-finalEntryReserve {
		b.isSpent = true
		entries, bytes := b.entries, b.bytes
		b.mu.Unlock()
		detail := fmt.Sprintf("the gateway's audit budget of %d bytes is spent", b.maxBytes)
		if overEntries {
			detail = fmt.Sprintf("the gateway's audit budget of %d entries is spent", b.maxEntries)
		}
		b.finish(ctx, entries, bytes, detail)
		return errBudgetSpent
	}
	b.entries++
	b.bytes += size
	b.order.RLock()
	b.mu.Unlock()
	err := b.inner.Record(ctx, kind, details)
	b.order.RUnlock()
	if err != nil {
		b.mu.Lock()
		b.entries--
		b.bytes -= size
		b.mu.Unlock()
	}
	return err
}

// charge takes entries and bytes from the budget for entries another writer keeps (an
// approval's request and decision, written with their state by the Approver), or says the
// budget cannot afford them, spending it as Record does.
func (b *auditBudget) charge(entries, bytes int64) error {
	b.mu.Lock()
	if b.isSpent {
		b.mu.Unlock()
		return errBudgetSpent
	}
	overEntries := b.entries+entries >= b.maxEntries
	if overEntries || b.bytes+bytes > b.maxBytes-finalEntryReserve {
		b.isSpent = true
		kept, size := b.entries, b.bytes
		b.mu.Unlock()
		b.finish(context.Background(), kept, size, fmt.Sprintf("the gateway's audit budget of %d entries and %d bytes is spent", b.maxEntries, b.maxBytes))
		return errBudgetSpent
	}
	b.entries += entries
	b.bytes += bytes
	b.mu.Unlock()
	return nil
}

// finish writes the entry saying the budget is spent, after every entry in flight, and calls
// onLimit. It runs once: on the Record that found the budget spent.
func (b *auditBudget) finish(ctx context.Context, entries, bytes int64, detail string) {
	b.order.Lock()
	// Not kept, the dispatch still ends: the budget is what protects the log.
	_ = b.inner.Record(ctx, entry.ToolGatewayBudget, map[string]any{
		"dispatch":        b.dispatchID,
		"role":            b.role,
		entry.KeyEntries:  entries,
		"bytes":           bytes,
		"max_entries":     b.maxEntries,
		"max_bytes":       b.maxBytes,
		entry.KeyDecision: decisionDenied,
		entry.KeyReason:   detail,
	})
	b.order.Unlock()
	if b.onLimit != nil {
		b.onLimit(detail)
	}
}

// spent reports whether the budget is spent.
func (b *auditBudget) spent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.isSpent
}

// entrySize is what an entry costs in the byte budget: its kind and its details as JSON, the
// part of an audit row the sandbox has any say in.
func entrySize(kind string, details map[string]any) int64 {
	b, err := json.Marshal(details)
	if err != nil {
		// Details hold strings and integers, which always marshal; charge the most if not.
		return 1 << 30
	}
	return int64(len(kind) + len(b))
}
