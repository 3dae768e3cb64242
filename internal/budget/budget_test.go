package budget

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNarrow(t *testing.T) {
	sub := Ceiling{Source: `subagent "fixer"`, Budget: Budget{Tokens: 10_000, USD: 2}}
	tgt := Ceiling{Source: `target "local"`, Budget: Budget{Tokens: 50_000, ModelCalls: 20}}
	for _, tc := range []struct {
		name    string
		req     Budget
		want    Budget
		wantErr []string
	}{
		{"nothing asked: the ceilings' minimum", Budget{}, Budget{Tokens: 10_000, USD: 2, ModelCalls: 20}, nil},
		{"narrowing each field", Budget{Tokens: 500, USD: 0.5, ModelCalls: 3}, Budget{Tokens: 500, USD: 0.5, ModelCalls: 3}, nil},
		{"equal is not raising", Budget{Tokens: 10_000}, Budget{Tokens: 10_000, USD: 2, ModelCalls: 20}, nil},
		{"raising tokens names the subagent", Budget{Tokens: 20_000}, Budget{}, []string{`budget tokens 20000 is above the ceiling of 10000 set by subagent "fixer"`}},
		{"raising calls names the target", Budget{ModelCalls: 21}, Budget{}, []string{`budget model_calls 21 is above the ceiling of 20 set by target "local"`}},
		{"raising usd", Budget{USD: 2.01}, Budget{}, []string{`budget usd 2.01 is above the ceiling of 2 set by subagent "fixer"`}},
		{"every raise is named", Budget{Tokens: 60_000, ModelCalls: 99}, Budget{}, []string{`ceiling of 10000 set by subagent "fixer"`, `ceiling of 50000 set by target "local"`, `ceiling of 20 set by target "local"`}},
		{"negative refused", Budget{Tokens: -1}, Budget{}, []string{"budget tokens -1: want 0 (no limit)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Narrow(tc.req, sub, tgt)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Narrow = %+v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Narrow = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNarrow_NoCeilingIsTheRequest(t *testing.T) {
	got, err := Narrow(Budget{Tokens: 7})
	if err != nil || got != (Budget{Tokens: 7}) {
		t.Fatalf("Narrow = %+v, %v", got, err)
	}
}

func TestValidate(t *testing.T) {
	for _, b := range []Budget{{USD: -0.1}, {USD: MaxUSD * 2}, {Tokens: MaxTokens + 1}, {ModelCalls: -3}} {
		if b.Validate() == nil {
			t.Errorf("%+v validated", b)
		}
	}
	if err := (Budget{Tokens: 1, USD: 0.01, ModelCalls: 1}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestSpent(t *testing.T) {
	b := Budget{Tokens: 100, USD: 1, ModelCalls: 2}
	if s := b.Spent(Usage{InputTokens: 50, OutputTokens: 49, ModelCalls: 1, CostUSD: 0.99}); s != "" {
		t.Errorf("spent below every limit: %s", s)
	}
	for u, want := range map[Usage]string{
		{InputTokens: 60, OutputTokens: 40}: "token budget spent: 100 of 100 tokens",
		{ModelCalls: 2}:                     "model call budget spent: 2 of 2 calls",
		{CostUSD: 1.5}:                      "usd budget spent: $1.5 of $1",
	} {
		if got := b.Spent(u); got != want {
			t.Errorf("Spent(%+v) = %q, want %q", u, got, want)
		}
	}
}

func TestPrices(t *testing.T) {
	ps := Prices{
		"gpt-4o":      {InputPerMTok: 2.5, OutputPerMTok: 10, CachedInputPerMTok: 1.25, Aliases: []string{"gpt-4o-2024-08-06"}},
		"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.6},
		"o1":          {InputPerMTok: 15, OutputPerMTok: 60},
	}
	if p, ok := ps.Lookup("gpt-4o-mini"); !ok || p.InputPerMTok != 0.15 {
		t.Errorf("exact name priced %+v %v", p, ok)
	}
	if p, ok := ps.Lookup("gpt-4o-2024-08-06"); !ok || p.InputPerMTok != 2.5 {
		t.Errorf("declared alias priced %+v %v, want gpt-4o's", p, ok)
	}
	// A name is never priced as a prefix of it. o1-pro costs ten times
	// o1; a dated snapshot nobody declared has no price.
	for _, name := range []string{"o1-pro-2025-03-19", "o1-pro", "gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-4", "GPT-4O", "gpt-4o "} {
		if p, ok := ps.Lookup(name); ok {
			t.Errorf("%q priced %+v, want no price: only exact names and declared aliases are priced", name, p)
		}
	}
	for prices, want := range map[string]string{
		`alias of two`:    "models: alias \"x\" of both \"a\" and \"b\"",
		`alias is a name`: "models: \"a\": alias \"b\" is a priced model of its own",
		`empty alias`:     "models: \"a\": an alias is empty",
	} {
		var bad Prices
		switch prices {
		case `alias of two`:
			bad = Prices{"a": {Aliases: []string{"x"}}, "b": {Aliases: []string{"x"}}}
		case `alias is a name`:
			bad = Prices{"a": {Aliases: []string{"b"}}, "b": {}}
		case `empty alias`:
			bad = Prices{"a": {Aliases: []string{" "}}}
		}
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v, want %q", prices, err, want)
		}
	}
	// 1M fresh input at 2.5, 1M cached at 1.25, 1M output at 10.
	got := ps["gpt-4o"].CostNano(Usage{InputTokens: 2_000_000, CachedTokens: 1_000_000, OutputTokens: 1_000_000})
	if got != 13_750_000_000 {
		t.Errorf("cost = %d nano-dollars, want 13.75 dollars", got)
	}
	// Cached tokens without a cached price are charged the input price, never free.
	if got := ps["gpt-4o-mini"].CostNano(Usage{InputTokens: 1_000_000, CachedTokens: 1_000_000}); got != 150_000_000 {
		t.Errorf("cached cost without a cached price = %d", got)
	}
	err := ps.Require(Budget{USD: 1}, "claude-x")
	if err == nil || !strings.Contains(err.Error(), `model "claude-x"`) || !strings.Contains(err.Error(), "priced: gpt-4o (gpt-4o-2024-08-06), gpt-4o-mini, o1") {
		t.Errorf("Require = %v", err)
	}
	if err := ps.Require(Budget{Tokens: 5}, "claude-x"); err != nil {
		t.Errorf("a token budget needs no price: %v", err)
	}
	if err := (Prices{"m": {InputPerMTok: -1}}).Validate(); err == nil {
		t.Error("a negative price validated")
	}
}

func TestBudget_JSON(t *testing.T) {
	for in, want := range map[string]Budget{
		`{"tokens":5,"usd":0.25}`:       {Tokens: 5, USD: 0.25},
		`{"usd":"1.5","model_calls":3}`: {USD: 1.5, ModelCalls: 3},
		`{"usd":null}`:                  {},
		`{}`:                            {},
	} {
		var b Budget
		if err := json.Unmarshal([]byte(in), &b); err != nil || b != want {
			t.Errorf("%s: %+v %v, want %+v", in, b, err, want)
		}
	}
	for _, in := range []string{`{"usd":"NaN"}`, `{"usd":"1e999"}`, `{"usd":true}`, `{"usd":"x"}`, `{"tokens":"5"}`} {
		var b Budget
		if err := json.Unmarshal([]byte(in), &b); err == nil {
			t.Errorf("%s read as %+v", in, b)
		}
	}
	m := Budget{Tokens: 1, USD: 0.1}.Canonical()
	if m["usd"] != "0.1" || m["tokens"] != int64(1) || len(m) != 2 {
		t.Errorf("Canonical = %v", m)
	}
}

// FuzzBudgetJSON: any input decodes to a budget or an error, never a panic, and a decoded
// budget that validates reads back the same from its canonical form.
func FuzzBudgetJSON(f *testing.F) {
	f.Add(`{"tokens":5,"usd":"0.25","model_calls":2}`)
	f.Add(`{"usd":1e-9}`)
	f.Fuzz(func(t *testing.T, in string) {
		var b Budget
		if json.Unmarshal([]byte(in), &b) != nil || b.Validate() != nil {
			return
		}
		out, err := json.Marshal(b.Canonical())
		if err != nil {
			t.Fatal(err)
		}
		var back Budget
		if err := json.Unmarshal(out, &back); err != nil || back != b {
			t.Fatalf("%s -> %s -> %+v (%v), want %+v", in, out, back, err, b)
		}
	})
}
