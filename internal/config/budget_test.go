package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/config"
)

func TestParse_BudgetsAndPrices(t *testing.T) {
	src := `
models:
  gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, cached_input_per_mtok: 0.075}
targets:
  local:
    budget: {tokens: 200000, usd: 2.5, model_calls: 40}
`
	c := config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(src), c); err != nil {
		t.Fatal(err)
	}
	if got := c.Targets["local"].Budget; got != (budget.Budget{Tokens: 200000, USD: 2.5, ModelCalls: 40}) {
		t.Errorf("target budget %+v", got)
	}
	if p, ok := c.Models.Lookup("gpt-4o-mini"); !ok || p.CachedInputPerMTok != 0.075 || p.OutputPerMTok != 0.6 {
		t.Errorf("price %+v %v", p, ok)
	}
}

func TestParse_BadBudgetsAndPrices(t *testing.T) {
	for src, want := range map[string]string{
		"targets: {local: {budget: {tokens: -5}}}":              "agora.yaml:1: targets.local.budget: budget tokens -5",
		"targets: {local: {budget: {usd: -1}}}":                 "budget usd -1",
		"targets: {local: {budget: {dollars: 3}}}":              "dollars",
		"models: {m: {input_per_mtok: -1, output_per_mtok: 1}}": "models.m",
		"models: {m: {input: 1}}":                               "input",
	} {
		err := config.Parse("agora.yaml", []byte(src), config.Default("/h"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", src, err, want)
		}
	}
}
