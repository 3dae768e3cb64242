package obs

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agora-dev/agora/internal/orch"
)

// idleEngine answers Stats with an idle engine.
type idleEngine struct{}

func (idleEngine) Stats(context.Context) (orch.Stats, error) { return orch.Stats{}, nil }

// exported lists the name of every metric serve registers.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := NewMetrics()
	ch := make(chan *prometheus.Desc, 1024)
	for _, c := range []prometheus.Collector{derived{m}, EngineGauges{Engine: idleEngine{}}, CheckpointAge{},
		m.transitions, m.attemptsEnded, m.runsEnded, m.lockWaits, m.reattached, m.transition, m.commit} {
		c.Describe(ch)
	}
	close(ch)
	name := regexp.MustCompile(`fqName: "([a-z_:]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if g := name.FindStringSubmatch(d.String()); g != nil {
			out[g[1]] = true
		}
	}
	return out
}

// TestDashboard_EveryQueryNamesAnExportedMetric: docs/grafana-agora.json is valid JSON, has
// panels, and every metric each panel's queries name is one serve exports (a histogram's
// _bucket, _sum and _count included), so a rename cannot leave a panel silently empty.
func TestDashboard_EveryQueryNamesAnExportedMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-agora.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	if len(d.Panels) < 10 {
		t.Fatalf("dashboard has %d panels", len(d.Panels))
	}
	have := exported(t)
	metric := regexp.MustCompile(`agora_[a-z_]+`)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metric.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no agora metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				base := n
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if s, ok := strings.CutSuffix(n, suf); ok && have[s] {
						base = s
					}
				}
				if !have[base] {
					t.Errorf("panel %q: %s is not a metric serve exports", p.Title, n)
				}
			}
		}
	}
}
