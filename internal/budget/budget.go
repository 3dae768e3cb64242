// Package budget is the spending limit of a dispatch or a plan run: the Budget format and its
// narrowing, model prices, the usage a model response reports in each wire shape the gateway
// forwards (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses), and the Meter
// that counts a dispatch's usage against its budget.
//
// It is a leaf: the catalog, the configuration, plans, the gateway, dispatch and the
// orchestrator all link it, and it links none of them.
package budget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Largest values a budget may name: far above any honest run, low enough that counters in
// nano-dollars and tokens never overflow an int64.
const (
	MaxTokens     = int64(1) << 50
	MaxModelCalls = int64(1) << 40
	MaxUSD        = 1_000_000.0
)

// Budget is a spending limit. A zero field sets no limit of that kind; a zero Budget limits
// nothing. Tokens counts input (cached included) plus output tokens; USD is the cost at the
// prices of agora.yaml's models; ModelCalls counts requests forwarded to the model.
type Budget struct {
	Tokens     int64   `json:"tokens,omitempty" yaml:"tokens"`
	USD        float64 `json:"usd,omitempty" yaml:"usd"`
	ModelCalls int64   `json:"model_calls,omitempty" yaml:"model_calls"`
}

// IsZero reports whether b limits nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate refuses a negative, non-finite or oversized field, naming it.
func (b Budget) Validate() error {
	var errs []error
	if b.Tokens < 0 || b.Tokens > MaxTokens {
		errs = append(errs, fmt.Errorf("budget tokens %d: want 0 (no limit) to %d", b.Tokens, MaxTokens))
	}
	if math.IsNaN(b.USD) || b.USD < 0 || b.USD > MaxUSD {
		errs = append(errs, fmt.Errorf("budget usd %s: want 0 (no limit) to %s", fmtUSD(b.USD), fmtUSD(MaxUSD)))
	}
	if b.ModelCalls < 0 || b.ModelCalls > MaxModelCalls {
		errs = append(errs, fmt.Errorf("budget model_calls %d: want 0 (no limit) to %d", b.ModelCalls, MaxModelCalls))
	}
	return errors.Join(errs...)
}

// Ceiling is a budget set by someone (a subagent, a target, a plan), named for errors.
type Ceiling struct {
	// Source names who set it: `subagent "fixer"`, `target "local"`, `plan run`.
	Source string
	Budget Budget
}

// Min is the tightest of bs, field by field: a field set anywhere is the smallest value set.
func Min(bs ...Budget) Budget {
	var m Budget
	for _, b := range bs {
		m.Tokens = minSet(m.Tokens, b.Tokens)
		m.ModelCalls = minSet(m.ModelCalls, b.ModelCalls)
		m.USD = minSet(m.USD, b.USD)
	}
	return m
}

func minSet[T int64 | float64](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Narrow returns the effective budget: the tightest of the ceilings and req. req may narrow
// a ceiling, never raise it: a field of req above a ceiling's is an error naming that
// ceiling, and so is a field req leaves unset that no ceiling sets (nothing to raise then).
func Narrow(req Budget, ceilings ...Ceiling) (Budget, error) {
	if err := req.Validate(); err != nil {
		return Budget{}, err
	}
	eff := req
	var errs []error
	for _, c := range ceilings {
		if err := c.Budget.Validate(); err != nil {
			return Budget{}, fmt.Errorf("%s: %w", c.Source, err)
		}
		if c.Budget.Tokens != 0 && req.Tokens > c.Budget.Tokens {
			errs = append(errs, fmt.Errorf("budget tokens %d is above the ceiling of %d set by %s: a dispatch may only narrow a budget", req.Tokens, c.Budget.Tokens, c.Source))
		}
		if c.Budget.USD != 0 && req.USD > c.Budget.USD {
			errs = append(errs, fmt.Errorf("budget usd %s is above the ceiling of %s set by %s: a dispatch may only narrow a budget", fmtUSD(req.USD), fmtUSD(c.Budget.USD), c.Source))
		}
		if c.Budget.ModelCalls != 0 && req.ModelCalls > c.Budget.ModelCalls {
			errs = append(errs, fmt.Errorf("budget model_calls %d is above the ceiling of %d set by %s: a dispatch may only narrow a budget", req.ModelCalls, c.Budget.ModelCalls, c.Source))
		}
		eff = Min(eff, c.Budget)
	}
	if err := errors.Join(errs...); err != nil {
		return Budget{}, err
	}
	return eff, nil
}

// String renders b as "tokens 1000, usd 2.5, model_calls 10", or "none".
func (b Budget) String() string {
	var parts []string
	if b.Tokens != 0 {
		parts = append(parts, "tokens "+strconv.FormatInt(b.Tokens, 10))
	}
	if b.USD != 0 {
		parts = append(parts, "usd "+fmtUSD(b.USD))
	}
	if b.ModelCalls != 0 {
		parts = append(parts, "model_calls "+strconv.FormatInt(b.ModelCalls, 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func fmtUSD(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
