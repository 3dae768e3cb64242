// Command warmservebench measures a no-op task's dispatch through `agora orch serve` with warm
// slots (standby supervisors) against the same through a serve without them, and a
// namespaced `bwrap true`, interleaved in one run on the same machine. Two homes, each with a
// subagent whose command is `true`: "cold" (no warm:) and "warm" (`warm: 2` on the local
// target), each with its own serve. Each round submits a one-task plan to each serve and
// waits for the run to end; the figure is the dispatch's life as serve's agora.db records it,
// from its acceptance (created_at) to its end (ended_at), so the submit and the polling cost
// nothing. Before each warm round the harness waits until two standbys are ready (the
// refill is not timed; a dispatch that found none would go cold and the harness says so).
// Run as root (slots need root).
//
//	make build && go run ./bench/warmservebench -n 30 -bin bin/agora
//
// With -docker IMAGE both homes' target is a docker target "box" of that image instead
// (serve's standbys each hold a slot container); set
// DOCKER_HOST to the engine's socket.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/store"
)

func main() {
	n := flag.Int("n", 30, "rounds")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	flag.StringVar(&dockerImage, "docker", "", "a docker target of this image instead of the local target")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "warmservebench:", err)
		os.Exit(1)
	}
}

// dockerImage, when set, makes both homes' target a docker target "box" of it.
var dockerImage string

// target is the homes' target.
func target() string {
	if dockerImage != "" {
		return "box"
	}
	return "local"
}

type home struct {
	name, bin, dir string
	serve          *exec.Cmd
	c              *client.Client
	db             *store.DB
	times          []time.Duration
	toStart        []time.Duration // accepted -> started (the sandbox released)
}

func newHome(ctx context.Context, name, bin, root, capDir string, warm int) (*home, error) {
	h := &home{name: name, bin: bin, dir: filepath.Join(root, name)}
	for _, args := range [][]string{
		{"init"},
		{"capability", "register", "noop", "--from", capDir},
		{"subagent", "register", "noop", "--command", "true", "--capability", "noop"},
	} {
		if out, err := h.cmd(args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: agora %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	if warm > 0 || dockerImage != "" {
		f, err := os.OpenFile(filepath.Join(h.dir, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(f, "targets:\n  %s:\n    warm: %d\n", target(), warm)
		if dockerImage != "" {
			fmt.Fprintf(f, "    provider: docker\n    image: %s\n", dockerImage)
		}
		f.Close()
	}
	h.serve = h.cmd("orch", "serve")
	log, err := os.Create(filepath.Join(root, name+"-serve.log"))
	if err != nil {
		return nil, err
	}
	h.serve.Stdout, h.serve.Stderr = log, log
	if err := h.serve.Start(); err != nil {
		return nil, err
	}
	h.c = client.New(filepath.Join(h.dir, "orch", "orch.sock"))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if hl, err := h.c.Health(ctx); err == nil && hl.PID == h.serve.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: serve did not answer within 30s", name)
		}
	}
	if h.db, err = store.Open(ctx, filepath.Join(h.dir, "agora.db"), agoradb.Migrations()); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *home) cmd(args ...string) *exec.Cmd {
	c := exec.Command(h.bin, args...)
	c.Env = append(os.Environ(), "AGORA_HOME="+h.dir)
	return c
}

func (h *home) stop() {
	if h.serve != nil && h.serve.Process != nil {
		h.serve.Process.Signal(syscall.SIGTERM)
		h.serve.Wait()
	}
	if h.db != nil {
		h.db.Close()
	}
}

// once runs a one-task plan and returns its dispatch's accepted-to-ended time.
func (h *home) once(ctx context.Context, i int) (time.Duration, error) {
	plan := fmt.Sprintf("version: 1\nname: noop-%d\ndefaults: {target: %s}\ntasks:\n  - id: t\n    subagent: noop\n", i, target())
	res, err := h.c.Submit(ctx, api.SubmitRequest{Source: []byte(plan), Actor: "bench"})
	if err != nil {
		return 0, err
	}
	var run api.Run
	for {
		if run, err = h.c.Status(ctx, res.Run.ID); err != nil {
			return 0, err
		}
		if run.State == lifecycle.RunSucceeded {
			break
		}
		if run.State == lifecycle.RunFailed || run.State == lifecycle.RunCancelled {
			return 0, fmt.Errorf("%s: run %s %s: %+v", h.name, run.ID, run.State, run.Tasks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	id := run.Tasks[0].DispatchID
	var created, started, ended string
	if err := h.db.SQL().QueryRowContext(ctx, `SELECT created_at, started_at, ended_at FROM dispatches WHERE id = ?`, id).Scan(&created, &started, &ended); err != nil {
		return 0, err
	}
	if st, err := time.Parse(time.RFC3339Nano, started); err == nil {
		if a, err := time.Parse(time.RFC3339Nano, created); err == nil && i >= 0 {
			h.toStart = append(h.toStart, st.Sub(a))
		}
	}
	a, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return 0, err
	}
	b, err := time.Parse(time.RFC3339Nano, ended)
	if err != nil {
		return 0, err
	}
	return b.Sub(a), nil
}

// readyStandbys counts the warm home's slots whose sandbox has started: a docker target's
// from serve's status file (rewritten every second).
func (h *home) readyStandbys() int {
	if dockerImage != "" {
		holders, _ := detach.ReadHolders(filepath.Join(h.dir, "dispatches"))
		ready := 0
		for _, hl := range holders {
			for _, c := range hl.Counts {
				if c.Target == target() {
					ready += c.Ready
				}
			}
		}
		return ready
	}
	dirs, _ := filepath.Glob(filepath.Join(h.dir, "dispatches", ".warm", "local", "slot-*", "task"))
	return len(dirs)
}

func run(n int, bin string) error {
	ctx := context.Background()
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root: warm slots attach a dispatch's files with mounts")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "warmservebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	capDir := filepath.Join(root, "cap")
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("commands: [\"true\"]\n"), 0o644); err != nil {
		return err
	}
	cold, err := newHome(ctx, "cold", bin, root, capDir, 0)
	if err != nil {
		return err
	}
	defer cold.stop()
	warm, err := newHome(ctx, "warm", bin, root, capDir, 2)
	if err != nil {
		return err
	}
	defer warm.stop()
	// One dispatch each before the rounds: the first pins the worker build, and the warm
	// home's teaches its target the shape its standbys start with.
	for _, h := range []*home{cold, warm} {
		if _, err := h.once(ctx, -1); err != nil {
			return err
		}
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return err
	}
	var bw []time.Duration
	for i := range n {
		for deadline := time.Now().Add(time.Minute); warm.readyStandbys() < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("round %d: the warm serve has %d standbys ready after a minute", i, warm.readyStandbys())
			}
		}
		time.Sleep(50 * time.Millisecond) // let the refill's last writes settle
		for _, h := range []*home{cold, warm} {
			d, err := h.once(ctx, i)
			if err != nil {
				return err
			}
			h.times = append(h.times, d)
		}
		t0 := time.Now()
		c := exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
			"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("bwrap: %v: %s", err, out)
		}
		bw = append(bw, time.Since(t0))
	}
	time.Sleep(1500 * time.Millisecond) // serve's status file is rewritten every second
	holders, err := detach.ReadHolders(filepath.Join(warm.dir, "dispatches"))
	if err != nil {
		return err
	}
	for _, h := range holders {
		for _, c := range h.Counts {
			fmt.Printf("warm serve's slots: %+v\n", c)
		}
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	p90 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)*9/10]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	fmt.Printf("rounds %d\n", n)
	fmt.Printf("cold serve   median %s  p90 %s\n", ms(med(cold.times)), ms(p90(cold.times)))
	fmt.Printf("warm serve   median %s  p90 %s\n", ms(med(warm.times)), ms(p90(warm.times)))
	fmt.Printf("accepted -> started: cold median %s, warm median %s\n", ms(med(cold.toStart)), ms(med(warm.toStart)))
	fmt.Printf("bwrap true   median %s  p90 %s\n", ms(med(bw)), ms(p90(bw)))
	fmt.Printf("warm/cold %.2fx   warm/bwrap %.2fx   cold/bwrap %.2fx\n",
		float64(med(warm.times))/float64(med(cold.times)), float64(med(warm.times))/float64(med(bw)), float64(med(cold.times))/float64(med(bw)))
	return nil
}
