package budget

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// maxPricePerMTok caps a configured price: far above any model's, low enough that a
// response's cost in nano-dollars cannot overflow.
const maxPricePerMTok = 100_000.0

// Price is what a model costs in US dollars per million tokens. Cached input tokens are
// charged CachedInputPerMTok (zero: InputPerMTok, never free by omission); tokens written to
// a prompt cache (Anthropic's cache_creation_input_tokens) are charged Anthropic's
// multiples of InputPerMTok: 1.25 for the 5-minute cache, 2 for the 1-hour one (and for
// writes the response does not place).
type Price struct {
	InputPerMTok       float64 `json:"input_per_mtok" yaml:"input_per_mtok"`
	OutputPerMTok      float64 `json:"output_per_mtok" yaml:"output_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty" yaml:"cached_input_per_mtok"`
	// Aliases are other names this price holds for, exactly (a dated snapshot such as
	// "gpt-4o-2024-08-06" of a priced "gpt-4o"): a name is priced only as itself or as a
	// declared alias, never as a prefix of a longer one.
	Aliases []string `json:"aliases,omitempty" yaml:"aliases"`
}

// Prices are the model prices of agora.yaml, by model name.
type Prices map[string]Price

// Validate refuses an empty model name, a negative, non-finite or oversized price, and an
// alias that is empty, is a priced name of its own or belongs to two models.
func (ps Prices) Validate() error {
	var errs []error
	owner := map[string]string{}
	for _, name := range ps.Names() {
		p := ps[name]
		if strings.TrimSpace(name) == "" {
			errs = append(errs, errors.New("models: a model name is empty"))
		}
		for field, v := range map[string]float64{"input_per_mtok": p.InputPerMTok, "output_per_mtok": p.OutputPerMTok, "cached_input_per_mtok": p.CachedInputPerMTok} {
			if math.IsNaN(v) || v < 0 || v > maxPricePerMTok {
				errs = append(errs, fmt.Errorf("models: %q: %s %s: want 0 to %s", name, field, fmtUSD(v), fmtUSD(maxPricePerMTok)))
			}
		}
		for _, a := range p.Aliases {
			_, priced := ps[a]
			switch {
			case strings.TrimSpace(a) == "":
				errs = append(errs, fmt.Errorf("models: %q: an alias is empty", name))
			case priced:
				errs = append(errs, fmt.Errorf("models: %q: alias %q is a priced model of its own", name, a))
			case owner[a] != "" && owner[a] != name:
				errs = append(errs, fmt.Errorf("models: alias %q of both %q and %q", a, owner[a], name))
			default:
				owner[a] = name
			}
		}
	}
	return errors.Join(errs...)
}

// Names lists the priced models, sorted.
func (ps Prices) Names() []string {
	names := slices.Sorted(maps.Keys(ps))
	return names
}

// Lookup finds the price of model: its exact name, else the model that declares it among
// its aliases. ok is false when neither exists. A name is never priced as the prefix of a
// longer one: "o1-pro-2025-03-19" is not "o1".
func (ps Prices) Lookup(model string) (p Price, ok bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	for _, n := range ps.Names() { // sorted, so an alias Validate refuses still has one reading
		if slices.Contains(ps[n].Aliases, model) {
			return ps[n], true
		}
	}
	return Price{}, false
}

// ErrNoPrice is returned when a usd budget meets a model that agora.yaml does not price.
var ErrNoPrice = errors.New("model has no price")

// Require refuses a usd budget for a model without a price (fail closed: the cost could not
// be counted), naming the priced models.
func (ps Prices) Require(b Budget, model string) error {
	if b.USD == 0 {
		return nil
	}
	if _, ok := ps.Lookup(model); ok {
		return nil
	}
	var names []string
	for _, n := range ps.Names() {
		if a := ps[n].Aliases; len(a) > 0 {
			n += " (" + strings.Join(a, ", ") + ")"
		}
		names = append(names, n)
	}
	known := cmp.Or(strings.Join(names, ", "), "none")
	return fmt.Errorf("a usd budget of %s needs a price for model %q in agora.yaml's models: (input_per_mtok, output_per_mtok); priced: %s: %w", fmtUSD(b.USD), model, known, ErrNoPrice)
}

// nanoPerMTok converts dollars per million tokens to nano-dollars per token.
const nanoPerMTok = 1e3

// Anthropic's prices of a prompt-cache write, as multiples of the input price
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing).
const (
	cacheWrite5m = 1.25
	cacheWrite1h = 2.0
)

// maxCostNano is the most one response costs, in nano-dollars: 2^53, the exact range of an
// audit entry's numbers.
const maxCostNano = int64(1) << 53

// CostNano is what u costs at p, in nano-dollars, rounded up, at most 2^53.
func (p Price) CostNano(u Usage) int64 {
	cachedPrice := cmp.Or(p.CachedInputPerMTok, p.InputPerMTok)
	fresh := max(u.InputTokens-u.CachedTokens, 0)
	// fresh holds the cache writes at the input price; they cost this much more.
	writes := float64(u.CacheWrite5mTokens)*(cacheWrite5m-1) + float64(u.CacheWrite1hTokens)*(cacheWrite1h-1)
	c := float64(fresh)*p.InputPerMTok*nanoPerMTok +
		float64(min(u.CachedTokens, u.InputTokens))*cachedPrice*nanoPerMTok +
		writes*p.InputPerMTok*nanoPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok*nanoPerMTok
	// Capped at 2^53 nano-dollars ($9M, above [MaxUSD]): every cost is then an exact JSON
	// number, which the gateway's audit entry needs (jcs refuses larger integers, and the
	// call's entry would be lost), and a meter's sum of them cannot overflow.
	if c >= float64(maxCostNano) {
		return maxCostNano
	}
	return int64(math.Ceil(c))
}
