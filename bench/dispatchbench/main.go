// Command dispatchbench measures the end-to-end overhead of a no-op dispatch: `agora dispatch
// run` of a subagent whose command is `true`, against a bare `bwrap ... true` and a `bwrap
// true` with the sandbox's namespaces, interleaved in one run on the same machine. It prints
// medians, p90s, the ratios, and where a dispatch's time goes, from its record (accepted,
// started, ended) and the worker's phases.
//
//	make build && go run ./bench/dispatchbench -n 50   # bin/agora with bin/agora-worker beside it
//
// With -repo a git repository is dispatched too (a checkout, a baseline and a capture that
// run git), as another interleaved command; with -base another agora binary (an earlier
// build, say) runs the same no-op dispatch in the same rounds, so a change is measured
// against what it replaces on the same machine at the same time; with the same binary on
// both sides, -bin's home (which also serves the in-process row) still measures about 0.5 ms
// faster, so a smaller change is measured both ways round (-bin new -base old, then -bin old
// -base new). With -serve an `agora orch
// serve` runs on -bin's home and a hand-off dispatch (the one-shot CLI gives its
// dispatch to serve) is measured too, the in-process one with AGORA_NO_HANDOFF=1 beside it.
// With -mcp an `agora mcp` (stdio, the official MCP Go SDK client) runs on each home and the
// no-op is also dispatched through its agora_dispatch tool, timed from the call to its answer
// (the finished record); with -warm its target keeps warm slots, which `agora mcp` holds as it
// holds them for serve.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("n", 50, "runs of each")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	repo := flag.String("repo", "", "also dispatch with --repo PATH (a git repository)")
	base := flag.String("base", "", "another agora binary to measure in the same rounds")
	serve := flag.Bool("serve", false, "also measure the one-shot handed to a running `agora orch serve` of -bin's home")
	warm := flag.Int("warm", 0, "with -serve or -resident: the local target keeps this many warm slots (needs root)")
	flag.BoolVar(&resident, "resident", false, "without -serve: let -bin's home run its resident dispatcher (the first dispatch starts it; measured apart), with an in-process row beside it; without -resident the home turns it off (resident: {idle: \"0\"}) and the one-shot runs in-process")
	flag.BoolVar(&script, "script", false, "with -resident: also dispatch from a script's environment (the bench's own plus _, SHLVL, TERM_PROGRAM and a variable of the script's: what no dispatch reads), on -bin's home and -base's, whose residents are started from the bench's environment")
	handoffOnly := flag.Bool("handoff-only", false, "with -serve: measure only the hand-offs (no in-process dispatch); with -base, -base's home gets its own serve and its hand-off is measured too")
	flag.BoolVar(&viaMCP, "mcp", false, "also dispatch through `agora mcp`'s agora_dispatch tool (stdio, the official SDK client), on -bin's home and -base's")
	flag.Parse()
	if err := run(*n, *bin, *repo, *base, *serve, *warm, *handoffOnly); err != nil {
		fmt.Fprintln(os.Stderr, "dispatchbench:", err)
		os.Exit(1)
	}
}

// viaMCP: also dispatch through `agora mcp` (-mcp).
var viaMCP bool

// resident: -bin's home keeps its resident dispatcher (-resident).
var resident bool

// script: also dispatch from a script's environment (-script).
var script bool

// scriptEnv is what a script's environment adds to the one its resident was started in: a
// shell sets _ and SHLVL anew, an editor's terminal adds TERM_PROGRAM, a job its own.
var scriptEnv = []string{"_=/usr/local/bin/nightly.sh", "SHLVL=2", "TERM_PROGRAM=vscode", "NIGHTLY_RUN=1"}

// bench is one measured command: its wall times and, for a dispatch, its steps.
type bench struct {
	name  string
	f     func() (string, error) // returns the dispatch id, or ""
	agora *home                  // the home a dispatch ran in; nil means the first
	walls []time.Duration
	steps steps
}

// home is one AGORA_HOME with the no-op subagent registered, and the binary that uses it.
type home struct {
	bin, dir string
	env      []string // more environment for every command
}

func newHome(bin, dir, capDir string) (*home, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	h := &home{bin: bin, dir: dir}
	for _, args := range [][]string{
		// A command that changes the catalog no longer creates a missing home.
		{"init"},
		{"capability", "register", "noop", "--from", capDir},
		{"subagent", "register", "noop", "--command", "true", "--capability", "noop"},
	} {
		if _, err := h.run(args...); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// run runs agora with args and returns its standard output.
func (h *home) run(args ...string) ([]byte, error) {
	c := exec.Command(h.bin, args...)
	c.Env = append(append(os.Environ(), "AGORA_HOME="+h.dir), h.env...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("agora %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// serve starts `agora orch serve` on the home and waits for its socket; stop ends it.
func (h *home) serve() (stop func(), err error) {
	c := exec.Command(h.bin, "orch", "serve")
	c.Env = append(append(os.Environ(), "AGORA_HOME="+h.dir), h.env...)
	if err := c.Start(); err != nil {
		return nil, err
	}
	stop = func() { c.Process.Signal(os.Interrupt); c.Wait() }
	sock := filepath.Join(h.dir, "orch", "orch.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("orch serve did not listen on %s within 30s", sock)
		}
	}
}

// serveWarm starts serve on the home, its local target keeping warm slots (0: none).
func (h *home) serveWarm(warm int) (stop func(), err error) {
	if warm > 0 {
		if err := h.setWarm(warm); err != nil {
			return nil, err
		}
	}
	return h.serve()
}

// dispatch returns a no-op `agora dispatch run` with extra arguments; it returns the id.
func (h *home) dispatch(extra ...string) func() (string, error) {
	return func() (string, error) {
		out, err := h.run(append([]string{"dispatch", "run", "--subagent", "noop"}, extra...)...)
		if err != nil {
			return "", err
		}
		id, _, _ := strings.Cut(string(out), "\n")
		return strings.TrimSpace(id), nil
	}
}

// mcp starts `agora mcp` on the home (its target keeping warm slots: 0 for none) and returns
// a no-op dispatch through its agora_dispatch tool; it returns the id once the tool answers
// with the finished record.
func (h *home) mcp(warm int) (f func() (string, error), stop func(), err error) {
	if warm > 0 {
		if err := h.setWarm(warm); err != nil {
			return nil, nil, err
		}
	}
	c := exec.Command(h.bin, "mcp", "--ceiling", "dispatch")
	c.Env = append(append(os.Environ(), "AGORA_HOME="+h.dir), h.env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "dispatchbench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: c}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("agora mcp: %w", err)
	}
	if warm > 0 {
		// The slots are filled in the background: give them the time a person would.
		time.Sleep(3 * time.Second)
	}
	f = func() (string, error) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch",
			Arguments: map[string]any{"subagent": "noop", "wait_seconds": 30}})
		if err != nil {
			return "", err
		}
		var ans struct {
			Dispatch struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"dispatch"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &ans); err != nil || res.IsError || ans.Dispatch.State != "finished" {
			return "", fmt.Errorf("agora_dispatch: error %v, state %q: %.500s", res.IsError, ans.Dispatch.State, b)
		}
		return ans.Dispatch.ID, nil
	}
	return f, func() { cs.Close() }, nil
}

// setWarm gives the home's local target warm slots.
// residentOff turns the home's resident dispatcher off: the one-shot CLI runs in-process.
func (h *home) residentOff() error {
	cfg := filepath.Join(h.dir, "agora.yaml")
	b, _ := os.ReadFile(cfg)
	return os.WriteFile(cfg, append(b, "\nresident: {idle: \"0\"}\n"...), 0o600)
}

// waitResident waits until the home's resident dispatcher listens.
func (h *home) waitResident() error {
	sock := filepath.Join(h.dir, "orch", "resident.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no resident dispatcher listens on %s within 30s", sock)
		}
	}
}

func (h *home) setWarm(warm int) error {
	cfg := filepath.Join(h.dir, "agora.yaml")
	b, _ := os.ReadFile(cfg)
	b = append(b, fmt.Sprintf("\ntargets:\n  local:\n    warm: %d\n", warm)...)
	return os.WriteFile(cfg, b, 0o600)
}

func run(n int, bin, repo, base string, serve bool, warm int, handoffOnly bool) error {
	tmp, err := os.MkdirTemp("", "dispatchbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	capDir := filepath.Join(tmp, "cap")
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("commands: [\"true\"]\n"), 0o644); err != nil {
		return err
	}
	agora, err := newHome(bin, filepath.Join(tmp, "home"), capDir)
	if err != nil {
		return err
	}
	// A baseline command that fails is run again, at most twice: `bwrap --ro-bind / /` binds
	// every mount below / and fails when one goes away meanwhile, as the stage mounts of the
	// dispatch just answered do while the resident releases them (ADR 0032). That is the
	// host's mount table moving under the baseline, not what it measures; a third failure is.
	command := func(argv ...string) func() (string, error) {
		return func() (string, error) {
			var err error
			for range 3 {
				c := exec.Command(argv[0], argv[1:]...)
				var stderr bytes.Buffer
				c.Stderr = &stderr
				if err = c.Run(); err == nil {
					return "", nil
				}
				err = fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.Bytes())
			}
			return "", err
		}
	}
	benches := []*bench{
		{name: "agora dispatch run (no-op, no repo)", f: agora.dispatch()},
		{name: "bwrap --ro-bind / / true (bare)", f: command("bwrap", "--ro-bind", "/", "/", "true")},
		{name: "bwrap with the sandbox's namespaces", f: command("bwrap", "--unshare-all", "--unshare-user",
			"--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true")},
	}
	if repo != "" {
		benches = append(benches, &bench{name: "agora dispatch run (no-op, --repo)", f: agora.dispatch("--repo", repo)})
	}
	switch {
	case resident && !serve:
		if warm > 0 {
			if err := agora.setWarm(warm); err != nil {
				return err
			}
		}
		// The first dispatch runs in-process and starts the resident: timed apart.
		start := time.Now()
		if _, err := agora.dispatch()(); err != nil {
			return err
		}
		fmt.Printf("first dispatch (in-process, starts the resident dispatcher): %.1f ms\n", ms(time.Since(start)))
		if err := agora.waitResident(); err != nil {
			return err
		}
		benches[0].name = "agora dispatch run (no-op, handed to the resident)"
		inProc := &home{bin: agora.bin, dir: agora.dir, env: []string{"AGORA_NO_HANDOFF=1"}}
		benches = append(benches, &bench{name: "agora dispatch run (no-op, in-process)", f: inProc.dispatch()})
		if script {
			sh := &home{bin: agora.bin, dir: agora.dir, env: scriptEnv}
			benches = append(benches, &bench{name: "agora dispatch run (no-op, script's environment)", f: sh.dispatch()})
		}
	case !serve:
		if err := agora.residentOff(); err != nil {
			return err
		}
	}
	if serve {
		stop, err := agora.serveWarm(warm)
		if err != nil {
			return err
		}
		defer stop()
		// The same home: the in-process one must say so, the handed-off one is the default.
		inProc := &home{bin: agora.bin, dir: agora.dir, env: []string{"AGORA_NO_HANDOFF=1"}}
		benches[0] = &bench{name: "agora dispatch run (no-op, in-process)", f: inProc.dispatch()}
		benches = append(benches, &bench{name: "agora dispatch run (no-op, handed to serve)", f: agora.dispatch()})
	}
	if base != "" {
		b, err := newHome(base, filepath.Join(tmp, "base"), capDir)
		if err != nil {
			return err
		}
		if serve && handoffOnly {
			stop, err := b.serveWarm(warm)
			if err != nil {
				return err
			}
			defer stop()
			benches = append(benches, &bench{name: "-base: dispatch run (no-op, handed to serve)", f: b.dispatch(), agora: b})
		} else {
			benches = append(benches, &bench{name: "-base: dispatch run (no-op, no repo)", f: b.dispatch(), agora: b})
		}
		if resident && script && !serve {
			if warm > 0 {
				if err := b.setWarm(warm); err != nil {
					return err
				}
			}
			// -base's resident, started from the bench's environment as -bin's was.
			if _, err := b.dispatch()(); err != nil {
				return err
			}
			if err := b.waitResident(); err != nil {
				return err
			}
			sh := &home{bin: b.bin, dir: b.dir, env: scriptEnv}
			benches = append(benches, &bench{name: "-base: dispatch run (no-op, script's environment)", f: sh.dispatch(), agora: b})
		}
		if repo != "" {
			benches = append(benches, &bench{name: "-base: dispatch run (no-op, --repo)", f: b.dispatch("--repo", repo), agora: b})
		}
	}
	if viaMCP {
		homes := []*home{agora}
		for _, b := range benches {
			if b.agora != nil && !slices.Contains(homes, b.agora) {
				homes = append(homes, b.agora)
			}
		}
		for i, h := range homes {
			w := warm
			if serve {
				w = 0 // serve's start already gave the home its slots
			}
			f, stop, err := h.mcp(w)
			if err != nil {
				return err
			}
			defer stop()
			name, owner := "agora_dispatch over MCP stdio (no-op)", (*home)(nil)
			if i > 0 {
				name, owner = "-base: agora_dispatch over MCP stdio (no-op)", h
			}
			benches = append(benches, &bench{name: name, f: f, agora: owner})
		}
	}
	if serve && handoffOnly {
		// The hand-off alone: the in-process row would only add load between the measured ones.
		benches = slices.DeleteFunc(benches, func(b *bench) bool { return strings.HasSuffix(b.name, "in-process)") })
	}
	// Warm up caches (page cache, the binary, the database) before measuring.
	for range 3 {
		for _, b := range benches {
			if _, err := b.f(); err != nil {
				return err
			}
		}
	}
	// Interleave them so load changes hit them alike, and rotate the order each round so each
	// command follows each other one as often: what one leaves running (a dispatch's
	// background teardown, the kernel's cleanup of its namespaces after the process exits)
	// slows the command after it. In a fixed order -base's dispatch always followed the
	// in-process one, and the same binary measured 0.3-1.6 ms faster as -bin than as -base.
	for i := range n {
		for j := range benches {
			b := benches[(i+j)%len(benches)]
			start := time.Now()
			id, err := b.f()
			if err != nil {
				return err
			}
			end := time.Now()
			b.walls = append(b.walls, end.Sub(start))
			if id == "" {
				continue
			}
			h := b.agora
			if h == nil {
				h = agora
			}
			out, err := h.run("dispatch", "describe", id, "-o", "json")
			if err != nil {
				return err
			}
			if err := b.steps.add(out, start, end); err != nil {
				return err
			}
		}
	}
	fmt.Printf("runs: %d each, interleaved\n", n)
	for _, b := range benches {
		report(b.name, b.walls)
	}
	var iso time.Duration
	for _, b := range benches {
		if b.name == "bwrap with the sandbox's namespaces" {
			iso = median(b.walls)
		}
	}
	if d := median(benches[0].walls); !handoffOnly || !serve {
		fmt.Printf("ratio dispatch/bare median: %.2fx\n", float64(d)/float64(median(benches[1].walls)))
		fmt.Printf("ratio dispatch/namespaced-bwrap median: %.2fx\n", float64(d)/float64(iso))
	}
	for _, b := range benches {
		if strings.HasSuffix(b.name, "handed to serve)") || strings.HasSuffix(b.name, "to the resident)") || strings.HasSuffix(b.name, "in-process)") || strings.Contains(b.name, "over MCP") || strings.Contains(b.name, "script's environment") {
			fmt.Printf("ratio %s/namespaced-bwrap median: %.2fx\n", b.name, float64(median(b.walls))/float64(iso))
		}
	}
	// Each -base dispatch against the same dispatch of -bin.
	for _, b := range benches {
		for _, a := range benches {
			if b.agora != nil && a.agora == nil && strings.TrimPrefix(b.name, "-base: ") == strings.TrimPrefix(a.name, "agora ") {
				fmt.Printf("ratio -base/-bin, %s: %.2fx\n", a.name, float64(median(b.walls))/float64(median(a.walls)))
			}
		}
	}
	for _, b := range benches {
		if len(b.steps.names) > 0 {
			fmt.Printf("\nsteps of %s:\n", b.name)
			b.steps.report()
		}
	}
	return nil
}

// steps collects the parts of each dispatch's wall time, by name, in the order first seen.
type steps struct {
	names []string
	by    map[string][]time.Duration
}

func (s *steps) put(name string, d time.Duration) {
	if s.by == nil {
		s.by = map[string][]time.Duration{}
	}
	if _, ok := s.by[name]; !ok {
		s.names = append(s.names, name)
	}
	s.by[name] = append(s.by[name], d)
}

// add splits one dispatch: process start to accepted (CLI start, opening agora.db, catalog
// reads, accept), accepted to started (loading the pinned content, staging, starting the
// sandbox), started to ended (the sandbox's life and reconcile), ended to exit (the summary,
// closing), and the worker's phases inside the sandbox.
func (s *steps) add(describe []byte, start, end time.Time) error {
	var r struct {
		CreatedAt time.Time `json:"created_at"`
		StartedAt time.Time `json:"started_at"`
		EndedAt   time.Time `json:"ended_at"`
		Result    struct {
			Phases []struct {
				Name string `json:"name"`
				MS   int64  `json:"ms"`
			} `json:"phases"`
		} `json:"result"`
	}
	if err := json.Unmarshal(describe, &r); err != nil {
		return fmt.Errorf("parse describe: %w", err)
	}
	s.put("process start -> accepted", r.CreatedAt.Sub(start))
	s.put("accepted -> started", r.StartedAt.Sub(r.CreatedAt))
	s.put("started -> ended", r.EndedAt.Sub(r.StartedAt))
	s.put("ended -> process exit", end.Sub(r.EndedAt))
	for _, p := range r.Result.Phases {
		s.put("  worker phase "+p.Name, time.Duration(p.MS)*time.Millisecond)
	}
	return nil
}

// report prints every step but the worker phases that took no whole millisecond.
func (s *steps) report() {
	for _, name := range s.names {
		if ds := s.by[name]; pct(ds, 90) > 0 || !strings.HasPrefix(name, " ") {
			report(name, ds)
		}
	}
}

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func report(name string, ds []time.Duration) {
	fmt.Printf("%-40s median %6.1f ms   p90 %6.1f ms\n", name, ms(median(ds)), ms(pct(ds, 90)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
