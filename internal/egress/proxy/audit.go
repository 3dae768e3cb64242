package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

var errAuditSpent = errors.New("the dispatch's network audit budget is spent")

// record writes one entry, charged to the budget. Nothing is allowed on an error.
func (p *Proxy) record(ctx context.Context, kind string, details map[string]any) error {
	p.scrubDetails(details)
	if kind == entry.NetClose {
		// A connection's end is recorded whatever happened: past the budget (it is bounded by
		// the allowed connections, each of which was charged) and after the dispatch's
		// context ended (the writer stops only once Close has returned).
		p.mu.Lock()
		p.entries++
		p.mu.Unlock()
		return p.cfg.Audit.Record(context.WithoutCancel(ctx), kind, details)
	}
	p.mu.Lock()
	if p.spent {
		p.mu.Unlock()
		return errAuditSpent
	}
	p.entries++
	last := p.entries >= p.cfg.MaxAuditEntries
	if last {
		p.spent = true
	}
	p.mu.Unlock()
	if last {
		details = map[string]any{"budget_spent": true, entry.KeyEntries: p.cfg.MaxAuditEntries}
		kind = entry.NetConnect
		err := p.cfg.Audit.Record(ctx, kind, details)
		if p.cfg.OnLimit != nil {
			p.cfg.OnLimit(fmt.Sprintf("network audit budget spent (%d entries): the sandbox opened too many connections", p.cfg.MaxAuditEntries))
		}
		if err != nil {
			return err
		}
		return errAuditSpent
	}
	return p.cfg.Audit.Record(ctx, kind, details)
}

// connectEntry is a net.connect entry's details.
func connectEntry(t target, via, decision, reason string, intercept bool) map[string]any {
	d := map[string]any{entry.KeyHost: t.host, entry.KeyPort: int(t.port), entry.KeyDecision: decision, entry.KeyVia: via}
	if reason != "" {
		d[entry.KeyReason] = reason
	}
	if intercept {
		d["terminated"] = true
	}
	return d
}

// closeEntry is a net.close entry's details.
func closeEntry(t target, up, down int64, d time.Duration, requests int, keys []string, errText string) map[string]any {
	e := map[string]any{
		entry.KeyHost: t.host, entry.KeyPort: int(t.port), entry.KeyBytesUp: up, entry.KeyBytesDown: down,
		entry.KeyDurationMS: d.Milliseconds(), entry.KeyRequests: requests,
	}
	if len(keys) > 0 {
		e["credentials"] = keys
	}
	if errText != "" {
		e["error"] = errText
	}
	return e
}

// maxStatsHosts caps the hosts counted by name on the record; the rest count as otherHosts.
const (
	maxStatsHosts = 256
	otherHosts    = "(other hosts)"
)

// count updates the record's counters.
func (p *Proxy) count(t target, allowed bool, up, down int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := t.String()
	m := p.stats.Refused
	if allowed {
		m = p.stats.Reached
	}
	if _, ok := m[k]; !ok && len(m) >= maxStatsHosts {
		k = otherHosts
	}
	if allowed {
		p.stats.Reached[k]++
	} else {
		p.stats.Refused[k]++
	}
	p.stats.BytesUp += up
	p.stats.BytesDown += down
}

func (p *Proxy) notice(line string) {
	if p.cfg.Notice != nil {
		p.cfg.Notice(p.scrub(line))
	}
}

// scrub masks every bound value in s: an error or a sentence may quote what a host sent, and
// a host may send the value back.
func (p *Proxy) scrub(s string) string {
	if p.scrubber == nil {
		return s
	}
	return p.scrubber.String(s)
}

// scrubDetails scrubs an entry's text in place.
func (p *Proxy) scrubDetails(d map[string]any) {
	if p.scrubber == nil {
		return
	}
	for k, v := range d {
		switch v := v.(type) {
		case string:
			d[k] = p.scrub(v)
		case []string:
			out := make([]string, len(v))
			for i, x := range v {
				out[i] = p.scrub(x)
			}
			d[k] = out
		}
	}
}
