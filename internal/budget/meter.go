package budget

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Meter counts one dispatch's usage against its budget. Spent is what the gateway asks
// before it forwards every model request: a few atomic loads, whatever the request.
// Safe for concurrent use.
type Meter struct {
	limit       Budget
	limitNano   int64 // limit.USD in nano-dollars; 0: none
	prices      Prices
	model       string // the model the dispatch declared, for a response that names none
	countTokens bool   // a token or usd limit is set: usage must be read

	input, output, cached, calls, costNano atomic.Int64
	stop                                   atomic.Pointer[string] // why nothing more is allowed, set once

	mu sync.Mutex // orders the stop reason's first write
}

// NewMeter counts against b, pricing responses with prices; model is the dispatch's
// declared model, used when a response names none.
func NewMeter(b Budget, prices Prices, model string) *Meter {
	m := &Meter{limit: b, prices: prices, model: model, countTokens: b.Tokens != 0 || b.USD != 0}
	if b.USD != 0 {
		m.limitNano = int64(math.Ceil(b.USD * 1e9))
	}
	return m
}

// Budget is the limit the meter counts against.
func (m *Meter) Budget() Budget { return m.limit }

// Spent says why the next model request must be refused, or "" when it may go.
func (m *Meter) Spent() string {
	if p := m.stop.Load(); p != nil {
		return *p
	}
	l := &m.limit
	if l.ModelCalls == 0 && l.Tokens == 0 && m.limitNano == 0 {
		return ""
	}
	if (l.ModelCalls != 0 && m.calls.Load() >= l.ModelCalls) ||
		(l.Tokens != 0 && m.input.Load()+m.output.Load() >= l.Tokens) ||
		(m.limitNano != 0 && m.costNano.Load() >= m.limitNano) {
		return l.Spent(m.Usage())
	}
	return ""
}

// Reserve is what the gateway asks before it forwards a model call: "" and the call counted,
// or why the budget is spent and nothing counted. The call is taken in the same atomic step
// that checks the call limit, so concurrent requests cannot pass it together: with one call
// left, one of them goes. Tokens and cost are known only when responses end, so calls in
// flight together may overshoot those limits by what they use.
func (m *Meter) Reserve() string {
	if s := m.Spent(); s != "" {
		return s
	}
	if n := m.calls.Add(1); m.limit.ModelCalls != 0 && n > m.limit.ModelCalls {
		m.calls.Add(-1)
		return m.limit.Spent(m.Usage())
	}
	return ""
}

// Add counts one response's usage, as Response.Result reports it. A response that reported
// no usage while a token or usd limit is set, or that names a model without a price while a
// usd limit is set, spends the budget: it cannot be counted, so nothing more is allowed.
func (m *Meter) Add(model string, u Usage, seen bool) {
	m.input.Add(u.InputTokens)
	m.output.Add(u.OutputTokens)
	m.cached.Add(u.CachedTokens)
	model, cost, priced := m.Price(model, u)
	if priced {
		m.costNano.Add(cost)
	} else if m.limitNano != 0 {
		m.setStop("usd budget cannot be counted: model " + quote(model) + " has no price in agora.yaml")
	}
	if !seen && m.countTokens {
		m.setStop("budget cannot be counted: a model response reported no usage")
	}
}

// Unpriced says why a model call naming model must be refused before it is sent: a usd
// limit is set and model has no price (neither a priced name nor a declared alias), so its
// cost could not be counted. "" when the call may go (refused at the
// request, not after the response spent what nobody could count).
func (m *Meter) Unpriced(model string) string {
	if m.limitNano == 0 {
		return ""
	}
	if _, ok := m.prices.Lookup(model); ok {
		return ""
	}
	var names []string
	for _, n := range m.prices.Names() {
		if a := m.prices[n].Aliases; len(a) > 0 {
			n += " (" + strings.Join(a, ", ") + ")"
		}
		names = append(names, n)
	}
	known := cmp.Or(strings.Join(names, ", "), "no model")
	return "usd budget of $" + fmtUSD(m.limit.USD) + " cannot count model " + quote(model) + ": agora.yaml prices " + known
}

// Price is what one response costs in nano-dollars at the meter's prices, and the model it
// is priced as (the dispatch's declared model when the response names none); priced is false
// when that model has no price.
func (m *Meter) Price(model string, u Usage) (priced string, nanoUSD int64, ok bool) {
	model = cmp.Or(model, m.model)
	p, ok := m.prices.Lookup(model)
	if !ok {
		return model, 0, false
	}
	return model, p.CostNano(u), true
}

func (m *Meter) setStop(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop.Load() == nil {
		m.stop.Store(&why)
	}
}

// Usage is what was counted so far.
func (m *Meter) Usage() Usage {
	return Usage{
		InputTokens:  m.input.Load(),
		OutputTokens: m.output.Load(),
		CachedTokens: m.cached.Load(),
		ModelCalls:   m.calls.Load(),
		CostUSD:      roundUSD(float64(m.costNano.Load()) / 1e9),
	}
}

// quote quotes a model name the upstream chose, cut to 64 bytes.
func quote(s string) string {
	s = s[:min(len(s), 64)]
	return strconv.Quote(s)
}
