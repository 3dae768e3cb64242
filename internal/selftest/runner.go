package selftest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Options are what one run of the corpus against one target needs.
type Options struct {
	// Agora is the agora program the runner drives (the one the person ran).
	Agora string
	// Env is the environment the runner's agora commands start from; AGORA_HOME is replaced
	// by the throw-away home's.
	Env []string
	// Home is the person's AGORA_HOME: the attacks try to reach it, and the runner never
	// writes into it.
	Home string
	// Target is the target's name, and Config the throw-away home's agora.yaml: that target's
	// settings as the person's agora.yaml has them (ConfigFor).
	Target string
	Config []byte
	// Worker is the host path of the worker program the target's dispatches start from.
	Worker string
	// Memory and Disk are the target's limits in bytes (its memory: and disk:).
	Memory, Disk int64
	// Attacks are the attacks to run, in order.
	Attacks []Attack
	// Progress, when set, gets a line per attack as it ends.
	Progress io.Writer
}

// Run builds a throw-away home beside nothing of the person's, applies the corpus's catalog
// there, dispatches every attack on the target and observes it. The throw-away home is
// removed after.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	work, err := os.MkdirTemp("", "agora-selftest-")
	if err != nil {
		return nil, fmt.Errorf("make the selftest's throw-away home: %w", err)
	}
	defer os.RemoveAll(work)
	fx, err := startFixtures(work)
	if err != nil {
		return nil, err
	}
	defer fx.close()
	r, err := newRun(ctx, o, work, fx)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rep := &Report{Target: o.Target}
	for _, a := range o.Attacks {
		row := r.attack(ctx, a)
		rep.Rows = append(rep.Rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "selftest %s: %s %s\n", o.Target, a.ID, verdict(row))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	rep.finish(time.Since(start))
	return rep, nil
}

func verdict(row Row) string {
	if row.Pass {
		return "ok (" + row.Seen + ")"
	}
	return "FAIL (expected " + row.Expected + ", seen " + row.Seen + ")"
}

// run is one run's throw-away home and host-side probes.
type run struct {
	o                Options
	work, home, repo string
	probe, secret    string
	env              []string
	listener         *listener
	fx               *fixtures
}

func newRun(ctx context.Context, o Options, work string, fx *fixtures) (*run, error) {
	secret, err := randomHex()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, work: work, home: filepath.Join(work, "home"), repo: filepath.Join(work, "repo"),
		probe: filepath.Join(work, "probe"), secret: secret, fx: fx}
	for _, p := range []string{o.Home, r.probe, o.Worker} {
		if strings.ContainsAny(p, `"\`) {
			return nil, fmt.Errorf("selftest cannot pass the path %q to its attacks: it holds a quote or a backslash", p)
		}
	}
	// The probe's directories are traversable by anyone, so only the sandbox keeps a
	// sandboxed uid from the secret and the drop directory.
	if err := os.Chmod(work, 0o755); err != nil {
		return nil, err
	}
	r.env = append(withoutHome(o.Env), "AGORA_HOME="+r.home, "AGORA_SELFTEST_PROBE="+secret)
	if err := writeProbe(r.probe, secret); err != nil {
		return nil, fmt.Errorf("write the selftest's host probe: %w", err)
	}
	if err := writeRepo(ctx, r.repo); err != nil {
		return nil, err
	}
	if err := writeManifest(filepath.Join(work, "manifest"), o.Attacks); err != nil {
		return nil, fmt.Errorf("write the selftest's catalog: %w", err)
	}
	if _, err := r.agora(ctx, "init"); err != nil {
		return nil, err
	}
	cfg, err := fx.config(o.Config)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(r.home, "agora.yaml"), cfg, 0o600); err != nil {
		return nil, fmt.Errorf("write the throw-away home's agora.yaml: %w", err)
	}
	if _, err := r.agora(ctx, "apply", "-f", filepath.Join(work, "manifest", "manifest.yaml")); err != nil {
		return nil, err
	}
	if err := fx.setup(ctx, r); err != nil {
		return nil, err
	}
	if r.listener, err = listen(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *run) close() { r.listener.close() }

func withoutHome(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AGORA_HOME=") && !strings.HasPrefix(kv, "AGORA_SELFTEST_PROBE=") {
			out = append(out, kv)
		}
	}
	return out
}

// errExit is an agora command that exited non-zero: its code and stderr.
type errExit struct {
	args   []string
	code   int
	stderr string
}

func (e *errExit) Error() string {
	return fmt.Sprintf("agora %s exited %d: %s", strings.Join(e.args, " "), e.code, strings.TrimSpace(e.stderr))
}

// agora runs the agora program in the throw-away home.
func (r *run) agora(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.o.Agora, args...)
	cmd.Env, cmd.Dir = r.env, r.work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.Bytes(), &errExit{args: args, code: ee.ExitCode(), stderr: stderr.String()}
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.o.Agora, err)
	}
	return stdout.Bytes(), nil
}

// record is what the runner reads of `agora dispatch run -o json`.
type record struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
	Sandbox   string `json:"sandbox"`
	Network   string `json:"network"`
	Isolation string `json:"isolation"`
}

// input is the dispatch input of one attack: the values run.sh reads.
func (r *run) input(a Attack, nonce string) (string, error) {
	m := map[string]string{
		"attack": a.ID, "nonce": nonce, "home": r.o.Home, "probe": r.probe, "worker": r.o.Worker,
		"port":   strconv.Itoa(r.listener.port()),
		"memory": strconv.FormatInt(r.o.Memory+1<<20, 10),
		"disk":   strconv.FormatInt(r.o.Disk>>20+1, 10),
	}
	r.fx.input(m)
	b, err := json.Marshal(m)
	return string(b), err
}

// dispatch runs one attack as a real dispatch and reads its record, outputs and patch.
func (r *run) dispatch(ctx context.Context, a Attack, nonce string) (seen, error) {
	in, err := r.input(a, nonce)
	if err != nil {
		return seen{}, err
	}
	args := []string{"dispatch", "run", "--in-process", "--subagent", subagentFor(a), "--target", r.o.Target,
		"--repo", r.repo, "--input", in, "-o", "json"}
	args = append(args, r.dispatchArgs(a)...)
	if a.Timeout > 0 {
		args = append(args, "--timeout", a.Timeout.String())
	}
	out, err := r.agora(ctx, args...)
	var s seen
	// A dispatch that ends other than finished exits non-zero and still prints its record.
	if jerr := json.Unmarshal(out, &s.rec); jerr != nil || s.rec.ID == "" {
		if err != nil {
			return seen{}, err
		}
		return seen{}, fmt.Errorf("read the record of attack %s: %v: %s", a.ID, jerr, clip(string(out), 200))
	}
	dir := filepath.Join(r.work, "out", s.rec.ID)
	if _, err := r.agora(ctx, "dispatch", "outputs", s.rec.ID, "--to", dir); err == nil {
		s.canary, _ = os.ReadFile(filepath.Join(dir, "canary"))
		s.report, _ = os.ReadFile(filepath.Join(dir, "report"))
		s.outputs = dir
	}
	if strings.TrimSpace(string(s.canary)) != nonce {
		logs, _ := r.agora(ctx, "dispatch", "logs", s.rec.ID)
		if bytes.Contains(logs, []byte("selftest canary "+nonce+"\n")) {
			s.canary = []byte(nonce)
		}
	}
	if a.Observe == ObservePatch {
		if s.patch, err = r.agora(ctx, "dispatch", "patch", s.rec.ID); err != nil {
			return seen{}, err
		}
	}
	if s.host, err = r.gather(ctx, a, nonce, out); err != nil {
		return seen{}, err
	}
	return s, nil
}

func randomHex() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
