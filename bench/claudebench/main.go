// Command claudebench measures agora's overhead on a no-op claude-code dispatch with the
// host-installed Claude Code: `agora dispatch run` of a subagent whose model answers at once,
// against the same claude run directly on the host against the same fake Messages API
// (internal/runtime/claudert/anthropictest), interleaved in one run on the same machine. The
// difference of the medians is agora's overhead: sandbox, staging, gateway, relay, hooks,
// capture, records and audit.
//
//	make build && ./scripts/agent-clis.sh && go run ./bench/claudebench -n 20   # agora-worker beside agora
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

const (
	key    = "sk-ant-api03-claudebench-0123456789abcdef"
	model  = "claude-sonnet-4-5"
	prompt = "Reply with the word done."
)

func main() {
	n := flag.Int("n", 20, "runs of each")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	claude := flag.String("claude", ".cache/npm/node_modules/.bin/claude", "the Claude Code CLI (scripts/agent-clis.sh installs it)")
	flag.Parse()
	if err := run(*n, *bin, *claude); err != nil {
		fmt.Fprintln(os.Stderr, "claudebench:", err)
		os.Exit(1)
	}
}

func run(n int, bin, claude string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cli, err := runtimebin.Resolve(context.Background(), "claude-code", mustAbs(claude))
	if err != nil {
		return err
	}
	api, err := anthropictest.Start(key, nil) // every turn: "done", no tool
	if err != nil {
		return err
	}
	defer api.Close()
	tmp, err := os.MkdirTemp("", "claudebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home, err := setup(tmp, bin, cli.Path, api.URL)
	if err != nil {
		return err
	}
	work, chome := filepath.Join(tmp, "direct"), filepath.Join(tmp, "direct-home")
	for _, d := range []string{work, chome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	direct := func() error {
		c := exec.Command(cli.Path, "--print", "--output-format=stream-json", "--verbose", "--model="+model,
			"--permission-mode=dontAsk", "--setting-sources=", prompt)
		c.Dir = work
		c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + chome, "ANTHROPIC_BASE_URL=" + api.URL,
			"ANTHROPIC_API_KEY=" + key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
		out, err := c.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(`"result":"done"`)) {
			return fmt.Errorf("claude direct: %v\n%s", err, out)
		}
		return nil
	}
	dispatch := func() error {
		before := len(api.Requests())
		defer func() {
			// A dispatch that did not reach the model measured nothing.
			if len(api.Requests()) == before {
				panic("claudebench: a dispatch finished without one model request")
			}
		}()
		out, err := home.agora("dispatch", "run", "--subagent", "noop", "--env", "anthropic", "--input", `{"prompt":"`+prompt+`"}`)
		if err != nil {
			return err
		}
		id, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		desc, err := home.agora("dispatch", "describe", id)
		if err != nil || !bytes.Contains(desc, []byte("state:     finished")) {
			return fmt.Errorf("dispatch %s did not finish: %v\n%s", id, err, desc)
		}
		return nil
	}
	// The first dispatch resolves and hashes the binary (cached from then on): measured alone.
	cold, err := timed(dispatch)
	if err != nil {
		return err
	}
	for range 2 { // warm up: page cache, both binaries, the database
		if _, err := timed(direct); err != nil {
			return err
		}
		if _, err := timed(dispatch); err != nil {
			return err
		}
	}
	var dd, dc []time.Duration
	for range n {
		d, err := timed(direct)
		if err != nil {
			return err
		}
		dc = append(dc, d)
		if d, err = timed(dispatch); err != nil {
			return err
		}
		dd = append(dd, d)
	}
	fmt.Printf("claude %s (%s, %d bytes); runs: %d each, interleaved\n", cli.Version, cli.Path, cli.Size, n)
	report("claude direct (same fake API)", dc)
	report("agora dispatch run (claude-code, host binary)", dd)
	fmt.Printf("first dispatch (resolves and hashes the binary): %s\n", cold.Round(time.Millisecond))
	fmt.Printf("agora overhead, median - median: %s\n", (median(dd) - median(dc)).Round(time.Millisecond))
	return nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

type agoraHome struct{ bin, dir string }

func (h agoraHome) agora(args ...string) ([]byte, error) {
	c := exec.Command(h.bin, args...)
	c.Env = append(os.Environ(), "AGORA_HOME="+h.dir, "ANTHROPIC_API_KEY="+key)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("agora %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// setup makes an AGORA_HOME whose agora.yaml names the host's claude, with a no-op
// claude-code subagent and the env bundle pointing at the fake.
func setup(tmp, bin, claude, apiURL string) (agoraHome, error) {
	h := agoraHome{bin: bin, dir: filepath.Join(tmp, "home")}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return h, err
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", claude)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		return h, err
	}
	capDir := filepath.Join(tmp, "cap")
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		return h, err
	}
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [read_file]\n"), 0o644); err != nil {
		return h, err
	}
	for _, args := range [][]string{
		{"capability", "register", "noop", "--from", capDir},
		{"subagent", "register", "noop", "--runtime", "claude-code", "--model", model, "--system-prompt", "Answer briefly.", "--capability", "noop"},
		{"env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL=" + apiURL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY"},
	} {
		if _, err := h.agora(args...); err != nil {
			return h, err
		}
	}
	return h, nil
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(name string, d []time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	fmt.Printf("%-48s median %s  p90 %s  min %s  max %s\n", name, median(s).Round(time.Millisecond),
		s[len(s)*9/10].Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
