package web

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/store"
)

const benchRunToken = "bench-run-page-token-0123456789abcdef0123456789abcdef"

// BenchmarkRunPage loads the run page (GET /runs/ID, as a browser does: over HTTP with a
// token, the whole answer read) of one run of 1,000, 10,000 and 100,000 tasks (layers of
// 100, two dependencies each), written in SQL into a real orch.db and agora.db (every
// attempt's dispatch record there) and read through the read-only connections serve reads
// them with. Two runs of each size: sealed (every task succeeded, one attempt with usage
// each) and open (half succeeded, 100 running, the rest pending). The view's clock moves a
// second on every load, so an open run's summary is always older than pageFresh: each load
// is a person's, not a reload within the same quarter second. The reads gate lets every
// load read at once, so ns/op is the page's own cost, without the pause the gate leaves
// between two turns (gate.go).
//
//	go test ./internal/web -run '^$' -bench RunPage -benchmem
func BenchmarkRunPage(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			orchPath, mainPath := filepath.Join(dir, "orch.db"), filepath.Join(dir, "agora.db")
			seedRunPageBench(b, orchPath, mainPath, n)
			orchRO, err := store.OpenReadOnly(ctx, orchPath)
			if err != nil {
				b.Fatal(err)
			}
			defer orchRO.Close()
			mainRO, err := store.OpenReadOnly(ctx, mainPath)
			if err != nil {
				b.Fatal(err)
			}
			defer mainRO.Close()
			var skew atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			srv, err := New(Config{Addr: "127.0.0.1:1", Now: now, Clients: []mcpserver.Client{{Name: "bench", Token: benchRunToken, Ceiling: mcpserver.CeilingRead}}},
				Sources{Orch: newFakeOrch(), Runs: orch.NewReader(orchRO.SQL()), Dispatches: dispatch.NewRecords(mainRO, audit.New(now), now)})
			if err != nil {
				b.Fatal(err)
			}
			srv.reads = newGate(1 << 20)
			ts := httptest.NewUnstartedServer(nil)
			ts.Start()
			ts.Config.Handler = srv.Handler(ts.Listener.Addr())
			defer ts.Close()
			for _, run := range []string{"sealed", "open"} {
				b.Run(run, func(b *testing.B) {
					id := benchRunID(run)
					// The graph waits for the run's shape (graphWait), so every load after it
					// has the shape, as every load of a run already open in a browser has.
					benchGet(b, ts.URL+"/api/runs/"+id+"/graph?x0=0&y0=0&x1=10&y1=10", "")
					benchGet(b, ts.URL+"/runs/"+id, "")
					var size int
					var loads []time.Duration
					for b.Loop() {
						skew.Add(int64(time.Second))
						t0 := time.Now()
						size = benchGet(b, ts.URL+"/runs/"+id, `id="run-counts"`)
						loads = append(loads, time.Since(t0))
					}
					// The median load besides the mean (ns/op): on a shared machine a few loads
					// descheduled for tens of ms move the mean, not the median.
					slices.Sort(loads)
					b.ReportMetric(float64(loads[len(loads)/2].Microseconds())/1000, "ms-median")
					b.ReportMetric(float64(size), "bytes/page")
				})
			}
		})
	}
}

func benchRunID(kind string) string {
	return fmt.Sprintf("01BENCH%s%019d", strings.ToUpper(kind[:1]), 0)
}

// benchGet loads url with the bench token and returns the answer's size; it fails unless the
// answer is 200 and holds want.
func benchGet(b *testing.B, url, want string) int {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+benchRunToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		b.Fatalf("GET %s: status %d, %d bytes, want 200 with %q:\n%.2000s", url, resp.StatusCode, len(body), want, body)
	}
	return len(body)
}

// seedRunPageBench writes the sealed and the open run of n tasks into new databases.
func seedRunPageBench(b *testing.B, orchPath, mainPath string, n int) {
	ctx := context.Background()
	odb, err := store.Open(ctx, orchPath, orch.Migrations())
	if err != nil {
		b.Fatal(err)
	}
	defer odb.Close()
	mdb, err := store.Open(ctx, mainPath, agoradb.Migrations())
	if err != nil {
		b.Fatal(err)
	}
	defer mdb.Close()
	var src strings.Builder
	src.WriteString("version: 1\nname: big\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&src, "  - {id: t%d, subagent: quick", i)
		if l := i / 100; l > 0 {
			p, prev := i%100, (l-1)*100
			fmt.Fprintf(&src, ", depends_on: [t%d, t%d]", prev+p, prev+(7*p+1)%100)
		}
		src.WriteString("}\n")
	}
	p, err := plan.Parse("big.yaml", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().UTC().Add(-time.Hour)
	at := func(i int) string { return start.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano) }
	usage := `{"input_tokens":1200,"output_tokens":300,"cached_tokens":0,"model_calls":2,"cost_usd":0.0042}`
	for _, kind := range []string{"sealed", "open"} {
		id := benchRunID(kind)
		state, ended, sealed := "succeeded", at(n), at(n)
		if kind == "open" {
			state, ended, sealed = "running", "", ""
		}
		err := odb.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at) VALUES (?, ?, ?, ?, 'bench', ?, ?, ?)`,
				id, "big-"+kind, p.Digest(), state, at(0), ended, sealed); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, id, p.Canonical()); err != nil {
				return err
			}
			for i := range n {
				st, d := taskStateFor(kind, i, n), fmt.Sprintf("%sD%020d", id[:8], i)
				if st == "pending" {
					d = ""
				}
				attempts := 0
				if d != "" {
					attempts = 1
				}
				if _, err := tx.Exec(`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES (?, ?, ?, ?, ?, ?)`,
					id, i, fmt.Sprintf("t%d", i), st, attempts, d); err != nil {
					return err
				}
				if d == "" {
					continue
				}
				ast, end, u := st, at(i+1), usage
				if st == "running" {
					ast, end, u = "live", "", ""
				}
				if _, err := tx.Exec(`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at, usage) VALUES (?, ?, ?, 1, ?, ?, ?, ?)`,
					d, id, i, ast, at(i), end, u); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("seed the %s run: %v", kind, err)
		}
		err = mdb.Tx(ctx, func(tx *sql.Tx) error {
			for i := range n {
				st := taskStateFor(kind, i, n)
				if st == "pending" {
					continue
				}
				dst := "finished"
				if st == "running" {
					dst = "running"
				}
				_, err := tx.Exec(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network, input_digest, timeout_ms, actor, created_at, started_at, ended_at, result, run_id, task_id, learn)
					VALUES (?, ?, 'quick', 'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none',
					'sha256:0000000000000000000000000000000000000000000000000000000000000000', 600000, 'orch', ?, ?, ?, '{"outputs":[]}', ?, ?, ?)`,
					fmt.Sprintf("%sD%020d", id[:8], i), dst, at(i), at(i), at(i+1), id, fmt.Sprintf("t%d", i), i%1000 == 7)
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("seed the %s run's dispatches: %v", kind, err)
		}
	}
}

// taskStateFor is the state of task i of n in the sealed or the open bench run.
func taskStateFor(kind string, i, n int) string {
	switch {
	case kind == "sealed" || i < n/2:
		return "succeeded"
	case i < n/2+100:
		return "running"
	default:
		return "pending"
	}
}
