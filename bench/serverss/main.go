// Command serverss measures `agora orch serve`'s peak resident memory when a client submits a
// large plan as JSON (the target: 200 MB at 100,000 tasks, with serve's own memory settings).
// It makes a throw-away home with the example catalog, starts serve, submits a layered plan
// of -n tasks (width 100, each task depending on up to three of the layer before, one of 200
// locks; concurrency 1, so the tasks wait rather than run) and prints serve's VmHWM after the
// submission was accepted and -settle later, with the submission's wall time.
//
//	make build && go run ./bench/serverss -n 100000 -bin bin/agora
//
// With -retry TASK it then retries that task (`agora orch retry serverss TASK`) and prints the
// peak again -settle later: where bubblewrap is missing, the run's first task fails and skips
// the rest, so -retry l0-0 measures taking back 99,999 skips (and the skips of the task's
// second failure).
//
// GODEBUG=gctrace=1 in the environment reaches serve: the largest live heap and heap goal of
// its collections are printed too, and with -keep its log (the path printed) shows each
// collection.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 100_000, "tasks in the plan")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	settle := flag.Duration("settle", 3*time.Second, "how long after the submission to read the peak again")
	keep := flag.Bool("keep", false, "keep the throw-away home (its serve.log, orch.db) instead of removing it")
	retry := flag.String("retry", "", "a failed task to retry after the settle (l0-0 where bwrap is missing)")
	status := flag.Bool("status", false, "read the run's status (agora orch status) after the settle, and serve's peak from then")
	flag.Parse()
	if err := run(*n, *bin, *settle, *keep, *retry, *status); err != nil {
		fmt.Fprintln(os.Stderr, "serverss:", err)
		os.Exit(1)
	}
}

func run(n int, bin string, settle time.Duration, keep bool, retry string, status bool) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	home, err := os.MkdirTemp("", "serverss")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(home)
	}
	env := append(os.Environ(), "AGORA_HOME="+home, "DEMO_API_TOKEN=serverss-not-a-secret")
	agora := func(args ...string) error {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("agora %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := agora("init"); err != nil {
		return err
	}
	if err := agora("apply", "-f", filepath.Join(root, "examples/catalog/agora-manifest.yaml")); err != nil {
		return err
	}
	planPath := filepath.Join(home, "plan.json")
	src, err := layeredPlan(n)
	if err != nil {
		return err
	}
	if err := os.WriteFile(planPath, src, 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(home, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	serve := exec.Command(bin, "orch", "serve")
	serve.Env, serve.Stderr = env, logf
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() { serve.Process.Kill(); serve.Wait() }()
	sock := filepath.Join(home, "orch", "orch.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve made no socket at %s in 30 s; its log: %s", sock, logPath)
		}
	}
	idle, err := peak(serve.Process.Pid)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := agora("orch", "submit", planPath); err != nil {
		return err
	}
	took := time.Since(start)
	atSubmit, err := peak(serve.Process.Pid)
	if err != nil {
		return err
	}
	time.Sleep(settle)
	after, err := peak(serve.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("tasks %d, plan %.1f MB of JSON: serve's peak RSS idle %.1f MB, at the submission's answer %.1f MB, %v later %.1f MB; the submission took %v\n",
		n, float64(len(src))/1e6, idle, atSubmit, settle, after, took.Round(time.Millisecond))
	if status {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", serve.Process.Pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("reset serve's peak RSS before the status: %w", err)
		}
		start := time.Now()
		if err := agora("orch", "status", "serverss", "-o", "json"); err != nil {
			return err
		}
		took := time.Since(start)
		p, err := peak(serve.Process.Pid)
		if err != nil {
			return err
		}
		fmt.Printf("status answered in %v; serve's peak RSS from the status on %.1f MB\n", took.Round(time.Millisecond), p)
	}
	if retry != "" {
		// The peak from here on: 5 resets VmHWM to the present RSS.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", serve.Process.Pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("reset serve's peak RSS before the retry: %w", err)
		}
		start := time.Now()
		if err := agora("orch", "retry", "serverss", retry); err != nil {
			return err
		}
		took := time.Since(start)
		time.Sleep(settle)
		afterRetry, err := peak(serve.Process.Pid)
		if err != nil {
			return err
		}
		fmt.Printf("retry of %s answered in %v; serve's peak RSS from the retry to %v later %.1f MB\n", retry, took.Round(time.Millisecond), settle, afterRetry)
	}
	if strings.Contains(os.Getenv("GODEBUG"), "gctrace=1") {
		if err := logf.Sync(); err != nil {
			return err
		}
		cycles, live, goal, err := gcPeaks(logPath)
		if err != nil {
			return err
		}
		fmt.Printf("gctrace: %d collections, largest live heap %d MB, largest heap goal %d MB\n", cycles, live, goal)
	}
	if keep {
		fmt.Printf("home %s (serve's log: %s)\n", home, logPath)
	}
	return nil
}

// layeredPlan is a plan of n tasks in layers of 100 for the example catalog's hello subagent.
func layeredPlan(n int) ([]byte, error) {
	const width, locks = 100, 200
	r := rand.New(rand.NewPCG(1, 2))
	type task struct {
		ID        string            `json:"id"`
		Subagent  string            `json:"subagent"`
		Input     map[string]string `json:"input"`
		Locks     []string          `json:"locks"`
		DependsOn []string          `json:"depends_on,omitempty"`
	}
	tasks := make([]task, n)
	for i := range tasks {
		l, w := i/width, i%width
		t := task{ID: fmt.Sprintf("l%d-%d", l, w), Subagent: "hello", Input: map[string]string{"task": fmt.Sprintf("t%d", i)},
			Locks: []string{fmt.Sprintf("lock%d", r.IntN(locks))}}
		if l > 0 {
			for range 3 {
				d := fmt.Sprintf("l%d-%d", l-1, r.IntN(width))
				if !slices.Contains(t.DependsOn, d) {
					t.DependsOn = append(t.DependsOn, d)
				}
			}
		}
		tasks[i] = t
	}
	var b bytes.Buffer
	err := json.NewEncoder(&b).Encode(map[string]any{"version": 1, "name": "serverss", "concurrency": 1,
		"defaults": map[string]any{"env": []string{"demo"}}, "tasks": tasks})
	return b.Bytes(), err
}

// gcPeaks reads the gctrace lines of serve's log ("gc N @T s P%: ... A->B->C MB, G MB goal,
// ..."): how many collections ran, the largest live heap C and the largest goal G, in MB.
func gcPeaks(logPath string) (cycles, live, goal int, err error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		_, rest, ok := strings.Cut(line, " MB, ")
		if !ok {
			continue
		}
		heaps := line[:len(line)-len(rest)-len(" MB, ")]
		heaps = heaps[strings.LastIndexByte(heaps, ' ')+1:] // A->B->C
		parts := strings.Split(heaps, "->")
		var c, g int
		if _, err := fmt.Sscanf(parts[len(parts)-1], "%d", &c); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(rest, "%d MB goal", &g); err != nil {
			continue
		}
		cycles, live, goal = cycles+1, max(live, c), max(goal, g)
	}
	return cycles, live, goal, nil
}

// peak is the process's VmHWM in MB.
func peak(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb * 1024 / 1e6, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// repoRoot is the directory holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the repository (no go.mod above the working directory)")
		}
		dir = parent
	}
}
