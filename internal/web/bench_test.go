package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/web"
)

// gateExec holds every attempt until release, then ends it succeeded.
type gateExec struct {
	mu   sync.Mutex
	gate chan struct{}
}

func (g *gateExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	go func() {
		select {
		case <-gate:
			done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
		case <-ctx.Done():
		}
	}()
}

func (g *gateExec) Cancel(context.Context, string) {}

const benchTasks = 200

// BenchmarkSSEFanout measures what open run pages add to the engine: a run of 200
// independent tasks is submitted and held, `pages` event streams are opened on it through
// the real handler, then every attempt is released and the run is timed to its end (each
// task: fired, succeeded, with their commits and audit entries). ns/op is per task. With
// listed, each page lists the first 100 tasks as a run page does (?tasks=), so its stream
// also reads and renders the rows of those that changed.
func BenchmarkSSEFanout(b *testing.B) {
	var first100 []string
	for i := range 100 {
		first100 = append(first100, fmt.Sprintf("t%d", i))
	}
	for _, c := range []struct {
		pages  int
		listed bool
	}{{0, false}, {50, false}, {50, true}} {
		pages, query := c.pages, ""
		name := fmt.Sprintf("pages=%d", pages)
		if c.listed {
			name += ",listed=100"
			query = "?tasks=" + strings.Join(first100, ",")
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			db, err := store.Open(ctx, filepath.Join(b.TempDir(), "orch.db"), orch.Migrations())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			x := &gateExec{}
			eng, err := orch.Open(ctx, db, audit.New(nil), x, orch.Options{})
			if err != nil {
				b.Fatal(err)
			}
			go eng.Run(ctx)
			srv, err := web.New(web.Config{Addr: "127.0.0.1:1", Clients: []mcpserver.Client{{Name: "bench", Token: uiOperatorToken, Ceiling: mcpserver.CeilingRead}}},
				web.Sources{Orch: eng, Runs: orch.NewReader(db.SQL()), Dispatches: noDispatches{}})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewUnstartedServer(nil)
			ts.Start()
			ts.Config.Handler = srv.Handler(ts.Listener.Addr())
			defer ts.Close()
			go srv.RunHub(ctx)
			var src strings.Builder
			fmt.Fprintf(&src, "version: 1\nname: NAME\nconcurrency: %d\ntasks:\n", benchTasks)
			for i := range benchTasks {
				fmt.Fprintf(&src, "  - {id: t%d, subagent: s}\n", i)
			}
			b.ResetTimer()
			b.StopTimer()
			runs := 0
			for i := 0; b.N > i*benchTasks; i++ {
				runs++
				p, err := plan.Parse("bench", []byte(strings.Replace(src.String(), "NAME", fmt.Sprintf("r%d", i), 1)))
				if err != nil {
					b.Fatal(err)
				}
				x.mu.Lock()
				x.gate = make(chan struct{})
				x.mu.Unlock()
				id, _, err := eng.Submit(ctx, p, orch.Checkout{}, "bench")
				if err != nil {
					b.Fatal(err)
				}
				var readers sync.WaitGroup
				for range pages {
					readers.Add(1)
					req, _ := http.NewRequest("GET", ts.URL+"/api/runs/"+id+"/events"+query, nil)
					req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					go func() {
						defer readers.Done()
						defer resp.Body.Close()
						sc := bufio.NewScanner(resp.Body)
						for sc.Scan() {
							if strings.Contains(sc.Text(), `"state":"succeeded","counts"`) {
								return // the run's final snapshot
							}
						}
					}()
				}
				events, stop := eng.Subscribe(id)
				b.StartTimer()
				x.mu.Lock()
				close(x.gate)
				x.mu.Unlock()
				for ev := range events {
					if ev.Task == "" && lifecycle.RunEnded(ev.State) {
						break
					}
				}
				b.StopTimer()
				stop()
				readers.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs*benchTasks), "ns/task")
		})
	}
}

type noDispatches struct{ web.Dispatches }

func (noDispatches) LearnInRun(context.Context, string) (map[string]bool, error) { return nil, nil }
