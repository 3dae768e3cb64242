package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// home is one AGORA_HOME with the no-op subagent registered and an `agora orch serve` of the
// same binary running on it, so `agora dispatch run` hands its dispatch to serve.
type home struct {
	bin, dir string
	serve    *exec.Cmd
	log      *os.File  // serve's stderr, to tell a taken hand-off from a declined one
	connects []float64 // ms from the CLI's execve to its connect to orch.sock, per run
}

func newHome(bin string) (*home, error) {
	if _, err := exec.LookPath("strace"); err != nil {
		return nil, fmt.Errorf("-handoff times the CLI with strace: %w", err)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "initbench")
	if err != nil {
		return nil, err
	}
	h := &home{bin: bin, dir: dir}
	capDir := filepath.Join(dir, "cap")
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("commands: [\"true\"]\n"), 0o644); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"init"},
		{"capability", "register", "noop", "--from", capDir},
		{"subagent", "register", "noop", "--command", "true", "--capability", "noop"},
	} {
		if out, err := h.command(args...).CombinedOutput(); err != nil {
			h.close()
			return nil, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, out)
		}
	}
	if h.log, err = os.Create(filepath.Join(dir, "serve.log")); err != nil {
		h.close()
		return nil, err
	}
	h.serve = h.command("orch", "serve")
	h.serve.Stdout, h.serve.Stderr = h.log, h.log
	if err := h.serve.Start(); err != nil {
		h.close()
		return nil, err
	}
	sock := filepath.Join(h.dir, "home", "orch", "orch.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.close()
			return nil, fmt.Errorf("%s orch serve did not listen on %s within 30s", bin, sock)
		}
	}
	// The first dispatches warm the page cache and serve's caches, as in every other round.
	for range 2 {
		if _, err := h.dispatch(); err != nil {
			h.close()
			return nil, err
		}
	}
	h.connects = nil
	return h, nil
}

// command is bin with args on this home, in this process's environment (serve's and the
// CLI's must match, or serve declines the hand-off).
func (h *home) command(args ...string) *exec.Cmd {
	c := exec.Command(h.bin, args...)
	c.Env = append(os.Environ(), "AGORA_HOME="+filepath.Join(h.dir, "home"))
	return c
}

// measure runs one handed-off dispatch and records its execve -> connect time.
func (h *home) measure() error {
	ms, err := h.dispatch()
	if err != nil {
		return err
	}
	h.connects = append(h.connects, ms)
	return nil
}

// dispatch runs `agora dispatch run --subagent noop` under strace and returns the ms from its
// execve to its connect to orch.sock. A run serve declined is an error: it was not the
// hand-off being measured.
func (h *home) dispatch() (float64, error) {
	out := filepath.Join(h.dir, "strace.out")
	c := exec.Command("strace", "--seccomp-bpf", "-f", "-ttt", "-e", "trace=execve,connect", "-o", out,
		h.bin, "dispatch", "run", "--subagent", "noop")
	c.Env = h.command().Env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return 0, fmt.Errorf("%s dispatch run: %w\n%s", h.bin, err, stderr.String())
	}
	if log, _ := os.ReadFile(h.log.Name()); bytes.Contains(log, []byte("hand-off declined")) {
		return 0, fmt.Errorf("%s orch serve declined a hand-off (see %s)", h.bin, h.log.Name())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	return execToConnect(b)
}

// execToConnect reads strace -f -ttt output: "PID SECONDS execve(...)" and
// "PID SECONDS connect(N, {sa_family=AF_UNIX, sun_path=\".../orch.sock\"}, ...)".
func execToConnect(b []byte) (float64, error) {
	var exec, conn float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 3)
		if len(f) != 3 {
			continue
		}
		t, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch {
		case exec == 0 && strings.HasPrefix(f[2], "execve("):
			exec = t
		case conn == 0 && strings.HasPrefix(f[2], "connect(") && strings.Contains(f[2], "orch.sock"):
			conn = t
		}
	}
	if exec == 0 || conn == 0 {
		return 0, fmt.Errorf("strace shows no execve and connect to orch.sock:\n%s", b)
	}
	return (conn - exec) * 1000, nil
}

func (h *home) close() {
	if h.serve != nil && h.serve.Process != nil {
		h.serve.Process.Signal(os.Interrupt)
		h.serve.Wait()
	}
	if h.log != nil {
		h.log.Close()
	}
	os.RemoveAll(h.dir)
}
