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
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/lifecycle"
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
	// settings as the person's agora.yaml has them (ConfigWithGateway).
	Target string
	Config []byte
	// Worker is the host path of the worker program the target's dispatches start from.
	Worker string
	// Memory and Disk are the target's limits in bytes (its memory: and disk:).
	Memory, Disk int64
	// Provider is the target's provider (local, docker, kubernetes): what the sandbox can
	// see of the host differs, and rows say so.
	Provider string
	// Attacks are the attacks to run; the report keeps their order.
	Attacks []Attack
	// Gateway, for a kubernetes target, is the network gateway the throw-away home serves
	// its pods on for the run ([PodGateway]); nil for other providers.
	Gateway *Gateway
	// Jobs is how many attacks run at once; 0 is [DefaultJobs], 1 runs them one after
	// another.
	Jobs int
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
	var other []string
	o.Attacks, other = forProvider(o.Attacks, o.Provider)
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
	rep := &Report{Target: o.Target, Rows: make([]Row, len(o.Attacks)), OtherProviders: other}
	var mu sync.Mutex // guards o.Progress
	r.each(ctx, func(i int) {
		rep.Rows[i] = r.one(ctx, i)
		if o.Progress != nil {
			mu.Lock()
			fmt.Fprintf(o.Progress, "selftest %s: %s %s\n", o.Target, o.Attacks[i].ID, verdict(rep.Rows[i]))
			mu.Unlock()
		}
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.finish(time.Since(start))
	return rep, nil
}

// forProvider splits attacks into those for a target of provider and the ids of the others.
func forProvider(attacks []Attack, provider string) (mine []Attack, other []string) {
	for _, a := range attacks {
		if a.For(provider) {
			mine = append(mine, a)
		} else {
			other = append(other, a.ID)
		}
	}
	return mine, other
}

func verdict(row Row) string {
	if row.Pass {
		return "ok (" + row.Seen + ")"
	}
	return "FAIL (expected " + row.Expected + ", seen " + row.Seen + ")"
}

// run is one run's throw-away home and host-side probes. An attack runs on a copy of its
// own (jobs.go): its probe directory and listener are its alone, so attacks that run at
// once never see each other's traces.
type run struct {
	o                Options
	work, home, repo string
	probe, secret    string
	env              []string
	listener         *listener
	blobs            *blob.Store
	stopGateway      func()
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
	// The dispatches' products are read where agora stored them, by digest, each checked
	// against its hash: one agora process per attack, not one per product.
	if r.blobs, err = blob.Open(filepath.Join(r.home, blobDir)); err != nil {
		return nil, fmt.Errorf("open the throw-away home's blobs: %w", err)
	}
	if o.Gateway != nil {
		if r.stopGateway, err = r.serveGateway(ctx, o.Gateway); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// blobDir is where a home keeps its blobs (internal/home's BlobDir, which selftest does not
// import: it never opens a home).
const blobDir = "blobs"

func (r *run) close() {
	r.listener.close()
	if r.stopGateway != nil {
		r.stopGateway()
	}
}

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
	// The record shows what the dispatch left on itself, not under "result".
	products
}

// products names what a dispatch left by digest.
type products struct {
	Patch   *artifact `json:"patch"`
	Stdout  *artifact `json:"stdout"`
	Outputs []struct {
		Path   string        `json:"path"`
		Digest digest.Digest `json:"digest"`
	} `json:"outputs"`
	// Final is the model's final answer its worker vouched for: what a review is read from.
	Final *artifact `json:"final"`
}

type artifact struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// podStarts are what a kubernetes target's attack with a time limit adds to it for the pod to
// start: its Job's deadline runs from the Job's creation, so the image's unpacking, the init
// container's fetch and the kubelet's turn come out of it. A pod that had not started the
// program when the deadline came observed nothing (no canary), so the attack runs once more
// with the longer allowance: the first pods on a fresh node, or on a loaded one, may take
// tens of seconds, and the longer allowance alone would keep a busy loop spinning a core that
// long on every quiet run.
var podStarts = []time.Duration{20 * time.Second, 90 * time.Second}

// sandboxStarts are the same for a bubblewrap sandbox or a container: its time limit runs from
// the dispatch's start, which a quiet host reaches in well under a second; a loaded one (a
// container engine beside a test suite) may take longer than the limit, and a run that
// observed nothing for that runs once more with a minute more.
var sandboxStarts = []time.Duration{0, time.Minute}

// startAllowances are the start allowances attack a is dispatched with, in order: one run
// with none for an attack without a time limit.
func (r *run) startAllowances(a Attack) []time.Duration {
	switch {
	case a.Timeout <= 0:
		return []time.Duration{0}
	case r.o.Provider == "kubernetes":
		return podStarts
	}
	return sandboxStarts
}

// startedLate says whether attack a's dispatch s ran out of time before its program wrote the
// canary and left nothing for the host to see: its sandbox or pod started too late for the
// observation, which says nothing of the control. A run the host-side probe saw something of
// is not late, whatever its canary: a second run must never stand in for a breach.
func startedLate(a Attack, nonce string, s seen) bool {
	return a.Timeout > 0 && s.rec.Reason == lifecycle.ReasonTimeout && s.probe == "" &&
		strings.TrimSpace(string(s.canary)) != nonce && !markedEntry(a, s, nonce)
}

// noCap reads a product whole, as `agora dispatch outputs`, `patch` and `logs` do: agora
// capped each when it stored it (the worker's outputs and patch, the logs).
const noCap = 0

// input is the dispatch input of one attack: the values run.sh reads.
func (r *run) input(a Attack, nonce string) (string, error) {
	m := map[string]string{
		"attack": a.ID, "nonce": nonce, "home": r.o.Home, "probe": r.probe, "worker": r.o.Worker,
		"port":   strconv.Itoa(r.listener.port()),
		"memory": strconv.FormatInt(r.o.Memory+1<<20, 10),
		"disk":   strconv.FormatInt(r.o.Disk>>20+1, 10), "provider": r.provider(),
	}
	r.fx.input(m)
	if a.Observe == ObserveReview {
		m[reviewInput] = a.Arg
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// provider is the target's provider, local when the target names none.
func (r *run) provider() string {
	if r.o.Provider == "" {
		return "local"
	}
	return r.o.Provider
}

// dispatch runs one attack as a real dispatch and reads its record, then its outputs,
// patch and log from the blobs the record names.
func (r *run) dispatch(ctx context.Context, a Attack, nonce string, startAllowance time.Duration) (seen, error) {
	in, err := r.input(a, nonce)
	if err != nil {
		return seen{}, err
	}
	args := []string{"dispatch", "run", "--in-process", "--subagent", subagentFor(a), "--target", r.o.Target,
		"--repo", r.repo, "--input", in, "-o", "json"}
	args = append(args, r.dispatchArgs(a)...)
	if a.Timeout > 0 {
		args = append(args, "--timeout", (a.Timeout + startAllowance).String())
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
	res := &s.rec.products
	dir := filepath.Join(r.work, "out", s.rec.ID)
	if err := r.writeOutputs(dir, res); err != nil {
		return seen{}, err
	}
	s.outputs = dir
	s.canary, _ = os.ReadFile(filepath.Join(dir, "canary"))
	s.report, _ = os.ReadFile(filepath.Join(dir, "report"))
	if res.Stdout != nil {
		s.logs, _ = r.blobs.Get(res.Stdout.Digest, noCap)
	}
	// An attack that fills the disk leaves no outputs; the log keeps the canary.
	if strings.TrimSpace(string(s.canary)) != nonce && bytes.Contains(s.logs, []byte("selftest canary "+nonce+"\n")) {
		s.canary = []byte(nonce)
	}
	if (a.Observe == ObservePatch || a.Observe == ObserveSecret) && res.Patch != nil {
		if s.patch, err = r.blobs.Get(res.Patch.Digest, noCap); err != nil {
			return seen{}, fmt.Errorf("read the patch of attack %s: %w", a.ID, err)
		}
	}
	if a.Observe == ObserveReview {
		if s.final, err = r.readFinal(res); err != nil {
			return seen{}, err
		}
	}
	if s.host, err = r.gather(ctx, a, nonce, out); err != nil {
		return seen{}, err
	}
	return s, nil
}

// writeOutputs writes the dispatch's outputs under dir as `agora dispatch outputs --to`
// would: the observations read files there. A path agora let through is clean and
// relative; one that is not is skipped.
func (r *run) writeOutputs(dir string, res *products) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, o := range res.Outputs {
		if !filepath.IsLocal(o.Path) {
			continue
		}
		b, err := r.blobs.Get(o.Digest, noCap)
		if err != nil {
			return fmt.Errorf("read the output %s of a selftest dispatch: %w", o.Path, err)
		}
		p := filepath.Join(dir, o.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("write the output %s of a selftest dispatch: %w", o.Path, err)
		}
	}
	return nil
}

func randomHex() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
