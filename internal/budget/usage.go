package budget

import (
	"encoding/json"
	"fmt"
	"math"
)

// Usage is what model calls consumed. InputTokens counts every input token, cached and
// cache-writing ones included; CachedTokens is the part of it read from a prompt cache.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	ModelCalls   int64   `json:"model_calls"`
	CostUSD      float64 `json:"cost_usd"`

	// CacheWrite5mTokens and CacheWrite1hTokens are the part of InputTokens one response
	// wrote to Anthropic's prompt cache for five minutes and for an hour, which cost 1.25
	// and 2 times the input price ([Price.CostNano]). They price a response and are not
	// kept: a sum of usages leaves them out.
	CacheWrite5mTokens int64 `json:"-"`
	CacheWrite1hTokens int64 `json:"-"`
}

// Tokens is what a token budget counts: input plus output.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether nothing was used.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:  u.InputTokens + v.InputTokens,
		OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedTokens: u.CachedTokens + v.CachedTokens,
		ModelCalls:   u.ModelCalls + v.ModelCalls,
		CostUSD:      roundUSD(u.CostUSD + v.CostUSD),
	}
}

// String renders u for people: "1200 in (300 cached), 80 out, 3 calls, $0.0123".
func (u Usage) String() string {
	return fmt.Sprintf("%d in (%d cached), %d out, %d calls, $%s", u.InputTokens, u.CachedTokens, u.OutputTokens, u.ModelCalls, fmtUSD(u.CostUSD))
}

// Spent says which limit of b u has reached, or "" when none: a request is refused once this
// is not empty.
func (b Budget) Spent(u Usage) string {
	switch {
	case b.ModelCalls != 0 && u.ModelCalls >= b.ModelCalls:
		return fmt.Sprintf("model call budget spent: %d of %d calls", u.ModelCalls, b.ModelCalls)
	case b.Tokens != 0 && u.Tokens() >= b.Tokens:
		return fmt.Sprintf("token budget spent: %d of %d tokens", u.Tokens(), b.Tokens)
	case b.USD != 0 && u.CostUSD >= b.USD:
		return fmt.Sprintf("usd budget spent: $%s of $%s", fmtUSD(u.CostUSD), fmtUSD(b.USD))
	}
	return ""
}

// roundUSD keeps nano-dollar precision, so sums print without float noise.
func roundUSD(v float64) float64 { return math.Round(v*1e9) / 1e9 }

// Shape is the wire format of a model response.
type Shape int

// The shapes the gateway forwards.
const (
	// ShapeAnthropic is the Anthropic Messages API: usage in the body, or in a stream's
	// message_start (message.usage) and message_delta (usage, cumulative) events.
	// input_tokens there excludes the cache's tokens.
	ShapeAnthropic Shape = iota + 1
	// ShapeChat is OpenAI Chat Completions: usage in the body, or in a stream's last chunk
	// when the request asked for stream_options.include_usage.
	ShapeChat
	// ShapeResponses is the OpenAI Responses API: usage in the body, or in a stream's
	// response.completed (or response.incomplete, response.failed) event's response.usage.
	ShapeResponses
)

// wireUsage is the union of the three shapes' usage objects.
type wireUsage struct {
	InputTokens     *int64 `json:"input_tokens"`
	OutputTokens    *int64 `json:"output_tokens"`
	CacheRead       *int64 `json:"cache_read_input_tokens"`
	CacheCreation   *int64 `json:"cache_creation_input_tokens"`
	CacheCreationBy *struct {
		Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// envelope is where a usage object sits in a body or an event: at the top (bodies,
// Anthropic's message_delta, a Chat chunk), in message (Anthropic's message_start) or in
// response (the Responses events).
type envelope struct {
	Model    string     `json:"model"`
	Usage    *wireUsage `json:"usage"`
	Message  *envelope  `json:"message"`
	Response *envelope  `json:"response"`
}

// tokens reads n, clamped to [0, MaxTokens]; nil is 0.
func tokens(n *int64) int64 {
	if n == nil || *n < 0 {
		return 0
	}
	return min(*n, MaxTokens)
}

// normalize converts a shape's usage object to Usage (tokens only).
func (s Shape) normalize(w *wireUsage) Usage {
	var u Usage
	switch s {
	case ShapeAnthropic:
		u.CachedTokens = tokens(w.CacheRead)
		u.InputTokens = tokens(w.InputTokens) + u.CachedTokens + tokens(w.CacheCreation)
		u.OutputTokens = tokens(w.OutputTokens)
		// Cache writes cost more than input, by how long the request asked the cache to
		// keep them; writes the breakdown does not place are priced as the dearer ones.
		if by := w.CacheCreationBy; by != nil {
			u.CacheWrite5mTokens, u.CacheWrite1hTokens = tokens(by.Ephemeral5m), tokens(by.Ephemeral1h)
		}
		if rest := tokens(w.CacheCreation) - u.CacheWrite5mTokens - u.CacheWrite1hTokens; rest > 0 {
			u.CacheWrite1hTokens += rest
		}
	case ShapeChat:
		u.InputTokens = tokens(w.PromptTokens)
		u.OutputTokens = tokens(w.CompletionTokens)
		if w.PromptDetails != nil {
			u.CachedTokens = tokens(w.PromptDetails.CachedTokens)
		}
	case ShapeResponses:
		u.InputTokens = tokens(w.InputTokens)
		u.OutputTokens = tokens(w.OutputTokens)
		if w.InputDetails != nil {
			u.CachedTokens = tokens(w.InputDetails.CachedTokens)
		}
	}
	u.CachedTokens = min(u.CachedTokens, u.InputTokens)
	return u
}

// merge folds one usage report into what a response reported so far. The shapes report
// running totals (Anthropic's message_delta repeats the whole count), so each field keeps
// the largest value seen, never a sum.
func merge(a, b Usage) Usage {
	return Usage{
		InputTokens:        max(a.InputTokens, b.InputTokens),
		OutputTokens:       max(a.OutputTokens, b.OutputTokens),
		CachedTokens:       max(a.CachedTokens, b.CachedTokens),
		CacheWrite5mTokens: max(a.CacheWrite5mTokens, b.CacheWrite5mTokens),
		CacheWrite1hTokens: max(a.CacheWrite1hTokens, b.CacheWrite1hTokens),
	}
}

// decodeEnvelope reads one JSON object's usage and model, wherever the shapes put them.
func (s Shape) decodeEnvelope(b []byte) (model string, u Usage, ok bool) {
	var e envelope
	if json.Unmarshal(b, &e) != nil {
		return "", Usage{}, false
	}
	for _, x := range []*envelope{&e, e.Message, e.Response} {
		if x == nil {
			continue
		}
		if x.Model != "" {
			model = x.Model
		}
		if x.Usage != nil {
			u, ok = merge(u, s.normalize(x.Usage)), true
		}
	}
	return model, u, ok
}
