package web_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// The 100,000-task harness (docs/benchmarks-history.md#web-pages-at-100000-tasks-issue-26-finding-8). It seeds one
// home with a sealed, succeeded run of 100,000 tasks (1,000 layers of 100, two dependencies
// each; every task one attempt with usage, its audit entries in orch.db and its dispatch
// record in agora.db), written in SQL straight into the databases the pre-change binary
// itself created (the newer one migrates them forward), then serves a copy of that home with
// each binary at once (WEB_BENCH_BASELINE, the pre-change binary, and this tree's) and
// measures, for each:
//
//   - every page and API answer: time to the last byte and bytes, as a script fetches them
//     with a bearer token (median and worst of 5, after one load that may fill caches);
//
//   - in loadRounds rounds that alternate the binaries: `agora orch status` of a small run
//     (median of 9) and the time of a run of quickTasks exec tasks (`true`, real sandboxes)
//     from submit to its end, alone and while 16 readers load the heaviest pages in a loop.
//
//     WEB_BENCH_BASELINE=/tmp/webview-base/agora go test ./internal/web -run '^$' -bench Pages100k -benchtime 1x -timeout 90m -v
const (
	bigWidth   = 100
	quickTasks = 40
	readers    = 16
)

// bigTasks is 100,000, or WEB_BENCH_TASKS (a smaller number tries the harness out quickly).
var bigTasks = func() int {
	if n, err := strconv.Atoi(os.Getenv("WEB_BENCH_TASKS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}()

func BenchmarkPages100k(b *testing.B) {
	base := os.Getenv("WEB_BENCH_BASELINE")
	if base == "" {
		b.Skip("SKIP: set WEB_BENCH_BASELINE to the pre-change agora binary (see docs/BENCHMARKS.md)")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("SKIP: bubblewrap (bwrap) is not installed; the engine's throughput is measured with real sandboxed workers")
	}
	dir := b.TempDir()
	t0 := time.Now()
	seeded := seedBig(b, base, filepath.Join(dir, "seeded"))
	b.Logf("seeded %d tasks in %s", bigTasks, time.Since(t0).Round(time.Second))
	results := map[string]*benchResult{}
	var served []*servedBin
	for _, bin := range []struct{ name, path string }{{"before", base}, {"after", agoraBin}} {
		home := filepath.Join(dir, bin.name)
		if out, err := exec.Command("cp", "-a", seeded.home, home).CombinedOutput(); err != nil {
			b.Fatalf("copy the seeded home: %v\n%s", err, out)
		}
		sb := serveBin(b, bin.name, bin.path, seeded, home)
		defer sb.stop()
		served = append(served, sb)
		results[bin.name] = &benchResult{pages: sb.pages(b)}
	}
	// The load rounds alternate the binaries, so neither is always measured while the
	// shared machine is busier.
	for round := range loadRounds {
		for k := range served {
			sb := served[(k+round)%len(served)]
			sb.load(b, results[sb.name], fmt.Sprintf("%s-%d", sb.name, round))
		}
	}
	report(b, results)
}

// loadRounds is how many times each binary's load is measured.
const loadRounds = 2

type seededHome struct {
	home       string
	runID      string
	lastTask   string
	lastDisp   string
	tokensFile string
}

// seedBig makes a home with bin (init, the catalog, one start of serve so orch.db exists)
// and writes the big run into it.
func seedBig(b *testing.B, bin, home string) seededHome {
	dir := filepath.Dir(home)
	s := seededHome{home: home, tokensFile: filepath.Join(dir, "tokens.yaml")}
	must(b, os.WriteFile(s.tokensFile, []byte("- {name: operator, token: "+uiOperatorToken+", ceiling: orchestrate}\n"), 0o600))
	cat := filepath.Join(dir, "catalog")
	must(b, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(b, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte("description: a shell\ncommands: [\"true\"]\n"), 0o644))
	must(b, os.WriteFile(filepath.Join(cat, "quick.yaml"), []byte("description: ends at once\nruntime: exec\ncommand: [\"true\"]\ncapabilities: [shell]\n"), 0o644))
	must(b, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte("version: 1\ncapabilities:\n  - {name: shell, from: caps/shell}\nsubagents:\n  - {name: quick, from: quick.yaml}\n"), 0o644))
	env := benchEnv(home, s.tokensFile)
	run := func(args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("agora %v: %v\n%s", args, err, out)
		}
	}
	run("init")
	run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	stop := startServe(b, bin, home, env, "")
	stop()

	var src strings.Builder
	src.WriteString("version: 1\nname: big\ntasks:\n")
	for i := range bigTasks {
		fmt.Fprintf(&src, "  - {id: t%d, subagent: quick", i)
		if l := i / bigWidth; l > 0 {
			p, prev := i%bigWidth, (l-1)*bigWidth
			fmt.Fprintf(&src, ", depends_on: [t%d, t%d]", prev+p, prev+(7*p+1)%bigWidth)
		}
		src.WriteString("}\n")
	}
	p, err := plan.Parse("big.yaml", []byte(src.String()))
	must(b, err)
	s.runID, s.lastTask, s.lastDisp = "01BIGRUN0000000000000000000", fmt.Sprintf("t%d", bigTasks-1), fmt.Sprintf("01BIGD%021d", bigTasks-1)
	ctx := context.Background()
	start := time.Now().UTC().Add(-time.Hour)
	at := func(i int) string {
		return start.Add(time.Duration(i) * 30 * time.Millisecond).Format("2006-01-02T15:04:05.000000000Z07:00")
	}
	orchDB := rawDB(b, filepath.Join(home, "orch", "orch.db"))
	defer orchDB.Close()
	log := audit.New(func() time.Time { return start })
	tx := begin(b, orchDB)
	exec1(b, tx, `INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at) VALUES (?, 'big', ?, 'succeeded', 'bench', ?, ?, ?)`,
		s.runID, p.Digest(), at(0), at(bigTasks), at(bigTasks))
	exec1(b, tx, `INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, s.runID, p.Canonical())
	_, err = log.AppendAll(ctx, tx, []audit.Entry{{Actor: "bench", Kind: "orch.run.submitted", Subject: "run/" + s.runID,
		Details: map[string]any{"plan_digest": p.Digest(), "tasks": int64(bigTasks), "run_name": "big"}}})
	must(b, err)
	usage := `{"input_tokens":1200,"output_tokens":300,"cached_tokens":0,"model_calls":2,"cost_usd":0.0042}`
	for i := range bigTasks {
		d := fmt.Sprintf("01BIGD%021d", i)
		exec1(b, tx, `INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES (?, ?, ?, 'succeeded', 1, ?)`, s.runID, i, fmt.Sprintf("t%d", i), d)
		exec1(b, tx, `INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at, usage) VALUES (?, ?, ?, 1, 'succeeded', ?, ?, ?)`,
			d, s.runID, i, at(i), at(i+1), usage)
		var entries []audit.Entry
		for _, k := range []string{"orch.task.ready", "orch.task.fired", "orch.task.succeeded"} {
			entries = append(entries, audit.Entry{Actor: "orch", Kind: k, Subject: "run/" + s.runID + "/task/t" + strconv.Itoa(i),
				Details: map[string]any{"run_name": "big", "dispatch_id": d}})
		}
		_, err := log.AppendAll(ctx, tx, entries)
		must(b, err)
		if i%10_000 == 9_999 {
			must(b, tx.Commit())
			tx = begin(b, orchDB)
		}
	}
	_, err = log.AppendAll(ctx, tx, []audit.Entry{{Actor: "orch", Kind: "orch.run.ended", Subject: "run/" + s.runID, Details: map[string]any{"state": "succeeded", "run_name": "big"}},
		{Actor: "orch", Kind: "orch.run.sealed", Subject: "run/" + s.runID, Details: map[string]any{"run_name": "big"}}})
	must(b, err)
	must(b, tx.Commit())

	mainDB := rawDB(b, filepath.Join(home, "agora.db"))
	defer mainDB.Close()
	tx = begin(b, mainDB)
	for i := range bigTasks {
		exec1(b, tx, `INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network, input_digest, timeout_ms, actor, created_at, started_at, ended_at, result)
			VALUES (?, 'finished', 'quick', 'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none',
			'sha256:0000000000000000000000000000000000000000000000000000000000000000', 600000, 'orch', ?, ?, ?, '{"outputs":[]}')`, fmt.Sprintf("01BIGD%021d", i), at(i), at(i), at(i+1))
		if i%20_000 == 19_999 {
			must(b, tx.Commit())
			tx = begin(b, mainDB)
		}
	}
	must(b, tx.Commit())
	return s
}

func benchEnv(home, tokens string) []string {
	return append(os.Environ(), "AGORA_HOME="+home, "AGORA_HTTP_TOKENS_FILE="+tokens, "AGORA_HTTP_TOKEN=")
}

func rawDB(b *testing.B, path string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	must(b, err)
	db.SetMaxOpenConns(1)
	return db
}

func begin(b *testing.B, db *sql.DB) *sql.Tx {
	tx, err := db.Begin()
	must(b, err)
	return tx
}

func exec1(b *testing.B, tx *sql.Tx, q string, args ...any) {
	if _, err := tx.Exec(q, args...); err != nil {
		b.Fatalf("%s: %v", q, err)
	}
}

// startServe starts `agora orch serve` (with --http addr unless ""), waits until it answers
// and returns how to stop it.
func startServe(b *testing.B, bin, home string, env []string, addr string) func() {
	args := []string{"orch", "serve"}
	if addr != "" {
		args = append(args, "--http", addr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	logf, err := os.Create(filepath.Join(filepath.Dir(home), filepath.Base(home)+"-serve.log"))
	must(b, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(b, cmd.Start())
	c := client.New(filepath.Join(home, "orch", "orch.sock"))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if h, err := c.Health(context.Background()); err == nil && h.PID == cmd.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			bb, _ := os.ReadFile(logf.Name())
			b.Fatalf("serve did not answer within 2 minutes:\n%s", bb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if addr != "" {
		for {
			resp, err := http.Get("http://" + addr + "/login")
			if err == nil {
				resp.Body.Close()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait(); logf.Close() }
}

type pageTime struct {
	median, worst time.Duration
	bytes         int
	status        int
}

type benchResult struct {
	pages map[string]pageTime
	// One of each per load round.
	statusAlone, statusLoaded []time.Duration // medians of 9
	quickAlone, quickLoaded   []time.Duration
	readerLoads               []int64
}

func benchPaths(s seededHome) []string {
	return []string{"/runs", "/dispatches", "/runs/" + s.runID, "/runs/" + s.runID + "?tasks=all", "/runs/" + s.runID + "/tasks/" + s.lastTask,
		"/dispatches/" + s.lastDisp, "/audit", "/audit?log=orch", "/catalog", "/api/runs", "/api/runs/" + s.runID,
		"/api/runs/" + s.runID + "/events", "/api/runs/" + s.runID + "/graph?x0=0&y0=0&x1=1400&y1=900",
		"/api/runs/" + s.runID + "/graph?x0=0&y0=2000000&x1=1400&y1=2000900"}
}

// get fetches path with the operator's token: a stream's first event, anything else whole.
func get(base, path string) (time.Duration, int, int, error) {
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	n := 0
	if strings.HasSuffix(path, "/events") && resp.StatusCode == 200 {
		br := bufio.NewReaderSize(resp.Body, 1<<20)
		for {
			l, err := br.ReadString('\n')
			n += len(l)
			if err != nil || strings.HasPrefix(l, "data: ") {
				break
			}
		}
	} else {
		m, _ := io.Copy(io.Discard, resp.Body)
		n = int(m)
	}
	return time.Since(t0), n, resp.StatusCode, nil
}

// servedBin is one binary serving its copy of the seeded home.
type servedBin struct {
	name, bin, home, base string
	env                   []string
	s                     seededHome
	c                     *client.Client
	small                 string
	stop                  func()
}

func serveBin(b *testing.B, name, bin string, s seededHome, home string) *servedBin {
	addr := agoratest.FreeAddr(b)
	sb := &servedBin{name: name, bin: bin, home: home, base: "http://" + addr, env: benchEnv(home, s.tokensFile), s: s,
		c: client.New(filepath.Join(home, "orch", "orch.sock"))}
	sb.stop = startServe(b, bin, home, sb.env, addr)
	sb.small = sb.submit(b, "small", 1)
	return sb
}

func (sb *servedBin) pages(b *testing.B) map[string]pageTime {
	out := map[string]pageTime{}
	for _, path := range benchPaths(sb.s) {
		get(sb.base, path) // warm: the first load may fill caches
		var times []time.Duration
		var pt pageTime
		for range 5 {
			d, n, code, err := get(sb.base, path)
			if err != nil {
				b.Fatalf("GET %s: %v", path, err)
			}
			times = append(times, d)
			pt.bytes, pt.status = n, code
		}
		slices.Sort(times)
		pt.median, pt.worst = times[len(times)/2], times[len(times)-1]
		out[path] = pt
	}
	return out
}

func (sb *servedBin) submit(b *testing.B, name string, n int) string {
	var src strings.Builder
	fmt.Fprintf(&src, "version: 1\nname: %s\nconcurrency: 8\ntasks:\n", name)
	for i := range n {
		fmt.Fprintf(&src, "  - {id: q%d, subagent: quick}\n", i)
	}
	resp, err := sb.c.Submit(context.Background(), api.SubmitRequest{File: name + ".yaml", Source: []byte(src.String()), Actor: "bench"})
	must(b, err)
	return resp.Run.ID
}

// quick times a run of quickTasks tasks from submit to its end.
func (sb *servedBin) quick(b *testing.B, name string) time.Duration {
	t0 := time.Now()
	id := sb.submit(b, name, quickTasks)
	for {
		r, err := sb.c.Status(context.Background(), id)
		must(b, err)
		if lifecycle.RunEnded(r.State) {
			if r.State != lifecycle.RunSucceeded {
				b.Fatalf("run %s ended %s: %v", name, r.State, r.Counts)
			}
			return time.Since(t0)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// status is the median time of `agora orch status` of the small run, 9 times.
func (sb *servedBin) status(b *testing.B) time.Duration {
	var ds []time.Duration
	for range 9 {
		cmd := exec.Command(sb.bin, "orch", "status", sb.small)
		cmd.Env = sb.env
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("orch status: %v\n%s", err, out)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// load measures orch status and a quick run alone, then while 16 readers load the heaviest
// pages in a loop.
func (sb *servedBin) load(b *testing.B, res *benchResult, tag string) {
	res.statusAlone = append(res.statusAlone, sb.status(b))
	res.quickAlone = append(res.quickAlone, sb.quick(b, "quick-alone-"+tag))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var loads atomic.Int64
	loop := []string{"/runs/" + sb.s.runID, "/runs", "/dispatches", "/runs/" + sb.s.runID + "/tasks/" + sb.s.lastTask, "/api/runs/" + sb.s.runID + "/events"}
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; ctx.Err() == nil; i++ {
				if _, _, code, err := get(sb.base, loop[i%len(loop)]); err == nil && code == 200 {
					loads.Add(1)
				}
			}
		}()
	}
	// Loaded: every reader has been round its pages once, and goes on.
	agoratest.WaitFor(b, time.Minute, "every reader's first round", func() bool { return loads.Load() >= int64(readers*len(loop)) })
	res.statusLoaded = append(res.statusLoaded, sb.status(b))
	res.quickLoaded = append(res.quickLoaded, sb.quick(b, "quick-loaded-"+tag))
	cancel()
	wg.Wait()
	res.readerLoads = append(res.readerLoads, loads.Load())
}

func report(b *testing.B, rs map[string]*benchResult) {
	var out strings.Builder
	fmt.Fprintf(&out, "\n| page or answer | before: median (worst) | before: bytes | after: median (worst) | after: bytes |\n|---|---|---|---|---|\n")
	before, after := rs["before"], rs["after"]
	var paths []string
	for p := range after.pages {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	cell := func(pt pageTime, ok bool) (string, string) {
		if !ok || pt.status != 200 {
			return fmt.Sprintf("(status %d)", pt.status), "-"
		}
		return fmt.Sprintf("%s (%s)", pt.median.Round(time.Millisecond), pt.worst.Round(time.Millisecond)), strconv.Itoa(pt.bytes)
	}
	for _, p := range paths {
		bt, bok := before.pages[p]
		at, aok := after.pages[p]
		b1, b2 := cell(bt, bok)
		a1, a2 := cell(at, aok)
		fmt.Fprintf(&out, "| `%s` | %s | %s | %s | %s |\n", strings.ReplaceAll(p, "01BIGRUN0000000000000000000", "BIG"), b1, b2, a1, a2)
	}
	ms := func(ds []time.Duration) string {
		var p []string
		for _, d := range ds {
			p = append(p, d.Round(time.Millisecond).String())
		}
		return strings.Join(p, ", ")
	}
	fmt.Fprintf(&out, "\n| (one figure per load round) | before | after |\n|---|---|---|\n")
	fmt.Fprintf(&out, "| `orch status` (small run), alone | %s | %s |\n", ms(before.statusAlone), ms(after.statusAlone))
	fmt.Fprintf(&out, "| `orch status`, %d readers | %s | %s |\n", readers, ms(before.statusLoaded), ms(after.statusLoaded))
	fmt.Fprintf(&out, "| %d-task run to its end, alone | %s | %s |\n", quickTasks, ms(before.quickAlone), ms(after.quickAlone))
	fmt.Fprintf(&out, "| %d-task run to its end, %d readers | %s | %s |\n", quickTasks, readers, ms(before.quickLoaded), ms(after.quickLoaded))
	fmt.Fprintf(&out, "| reader loads answered meanwhile | %v | %v |\n", before.readerLoads, after.readerLoads)
	b.Log(out.String())
	os.WriteFile(filepath.Join(artifactDir(b), "pages100k.md"), []byte(out.String()), 0o644)
}
