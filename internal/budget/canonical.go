package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Canonical is b as hashed documents hold it (RFC 8785 JSON in agora admits only integral
// numbers): the fields set, usd as a decimal string ("0.25").
func (b Budget) Canonical() map[string]any {
	m := map[string]any{}
	if b.Tokens != 0 {
		m["tokens"] = b.Tokens
	}
	if b.USD != 0 {
		m["usd"] = fmtUSD(b.USD)
	}
	if b.ModelCalls != 0 {
		m["model_calls"] = b.ModelCalls
	}
	return m
}

// UnmarshalJSON reads a budget with usd as a number or as a decimal string (the canonical
// form); anything else in usd is an error.
func (b *Budget) UnmarshalJSON(data []byte) error {
	var raw struct {
		Tokens     int64           `json:"tokens"`
		USD        json.RawMessage `json:"usd"`
		ModelCalls int64           `json:"model_calls"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("budget: %w", err)
	}
	var usd float64
	if u := bytes.TrimSpace(raw.USD); len(u) > 0 && !bytes.Equal(u, []byte("null")) {
		s := string(u)
		if u[0] == '"' {
			if err := json.Unmarshal(u, &s); err != nil {
				return fmt.Errorf("budget usd: %w", err)
			}
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("budget usd %.32q is not a decimal number", s)
		}
		usd = v
	}
	*b = Budget{Tokens: raw.Tokens, USD: usd, ModelCalls: raw.ModelCalls}
	return nil
}
