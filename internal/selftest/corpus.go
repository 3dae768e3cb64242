package selftest

import (
	"bufio"
	"cmp"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/shellwords"
)

// Expected outcomes of an attack.
const (
	Blocked = "blocked" // the boundary held: the operation did not take effect
	Allowed = "allowed" // the operation took effect (a legitimate operation must)
)

// The ways the runner observes an attack (the "observe:" header). Every one needs the
// attack's canary first: a program that did not run is never counted as blocked.
const (
	// ObserveReport reads the program's own report (done or refused), the weakest
	// evidence: an attack that observes this way is one whose control test in the corpus's
	// tests makes it report done.
	ObserveReport = "report"
	// ObserveSecret: allowed when the report, the log, an output or the patch carries the
	// run's host secret, which the program cannot know unless it read it across the boundary.
	ObserveSecret = "secret"
	// ObserveListener: allowed when the runner's host loopback listener saw the run's nonce.
	// For it, ObserveDropfile, ObserveProcess and ObserveOutput, a quiet probe is blocked only
	// when the program reported: the probe is as quiet when it stopped before its attack.
	ObserveListener = "listener"
	// ObserveDropfile: allowed when a file appeared in the runner's world-writable host
	// directory.
	ObserveDropfile = "dropfile"
	// ObserveProcess: allowed when a host process carries the run's nonce after the
	// dispatch ended (the runner kills it).
	ObserveProcess = "process"
	// ObserveReason: blocked when the dispatch failed with the named reason.
	ObserveReason = "reason"
	// ObserveState: allowed when the dispatch ended in the named state.
	ObserveState = "state"
	// ObservePatch: allowed when the dispatch's patch names a path under the argument; a
	// patch that is empty does not count as blocked (the capture may not have happened).
	ObservePatch = "patch"
	// ObserveOutput: allowed when the dispatch's outputs hold the named file.
	ObserveOutput = "output"
	// ObserveLogs: blocked when the standard output the host kept for the dispatch is at
	// most the argument ("5MiB") and the program reported done (it wrote all it meant to).
	ObserveLogs = "logs"
)

// Attack is one entry of the corpus.
type Attack struct {
	ID      string
	Class   string
	Expect  string // Blocked or Allowed
	Control string // what decides: sandbox, proxy, grant, limits, patch
	Reason  string
	// Observe is how the runner tells what happened, and Arg its argument (a reason, a
	// state, a path).
	Observe, Arg string
	// Needs names an enforcement the dispatch's record must show (its isolation), else the
	// attack is reported "not enforced here".
	Needs string
	// Subagent is "" (no network grant), "net" (behind the egress proxy, with the grants of
	// bundle/capability-net.yaml) or "gw" (an openai subagent whose scripted model on the
	// host's loopback asks it to run the program, so that the model gateway is there).
	Subagent string
	// Providers, when set, are the only providers the entry is for (the "providers:" header,
	// e.g. local): it checks a sandbox's layout that only they give, such as bubblewrap's
	// root holding no directory but the system's, where a container's root is its image's.
	Providers []string
	// Dispatch are more flags of its `agora dispatch run` (a verify gate, a budget, an env
	// bundle), from the "# dispatch:" header read as one simple shell command line.
	Dispatch []string
	// Timeout narrows the dispatch's time limit (--timeout); 0 keeps the target's.
	Timeout time.Duration
	// Program is the shell program the worker runs (the file, header included).
	Program []byte
}

//go:embed corpus/*.sh
var corpusFS embed.FS

// validID reports whether id is lower-case words of letters and digits joined by single -.
func validID(id string) bool {
	for _, w := range strings.Split(id, "-") {
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			return false
		}
	}
	return true
}

// Corpus returns the built-in attacks, sorted by id.
func Corpus() ([]Attack, error) { return Load(corpusFS, "corpus") }

// Load reads every DIR/*.sh of fsys as an attack.
func Load(fsys fs.FS, dir string) ([]Attack, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sh"))
	if err != nil {
		return nil, err
	}
	out := make([]Attack, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		a, err := parse(strings.TrimSuffix(path.Base(n), ".sh"), b)
		if err != nil {
			return nil, fmt.Errorf("attack %s: %w", n, err)
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Attack) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// parse reads an attack's header: the leading "# key: value" lines.
func parse(id string, b []byte) (Attack, error) {
	if !validID(id) {
		return Attack{}, fmt.Errorf("id %q: want lower-case words joined by -", id)
	}
	a := Attack{ID: id, Observe: ObserveReport, Program: b}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), ": ")
		if !ok || !strings.HasPrefix(sc.Text(), "# ") {
			break
		}
		if err := a.set(k, strings.TrimSpace(v)); err != nil {
			return Attack{}, err
		}
	}
	return a, a.valid()
}

func (a *Attack) set(k, v string) error {
	switch k {
	case "class":
		a.Class = v
	case "expect":
		a.Expect = v
	case "control":
		a.Control = v
	case "reason":
		a.Reason = v
	case "needs":
		a.Needs = v
	case "subagent":
		a.Subagent = v
	case "providers":
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(knownProviders, p) {
				return fmt.Errorf("providers: %q is not one of %s", p, strings.Join(knownProviders, ", "))
			}
			a.Providers = append(a.Providers, p)
		}
	case "dispatch":
		w, err := shellwords.Split(v)
		if err != nil {
			return fmt.Errorf("dispatch: %w", err)
		}
		a.Dispatch = w
	case "observe":
		a.Observe, a.Arg, _ = strings.Cut(v, " ")
	case "timeout":
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
		a.Timeout = d
	default:
		return fmt.Errorf("unknown header key %q", k)
	}
	return nil
}

// knownProviders are the providers a "providers:" header may name.
var knownProviders = []string{"local", "docker", "kubernetes"}

// For reports whether the entry runs on a target of provider ("" is local).
func (a Attack) For(provider string) bool {
	provider = cmp.Or(provider, "local")
	return len(a.Providers) == 0 || slices.Contains(a.Providers, provider)
}

func (a *Attack) valid() error {
	switch {
	case a.Class == "" || a.Control == "" || a.Reason == "":
		return fmt.Errorf("class, control and reason are required")
	case a.Expect != Blocked && a.Expect != Allowed:
		return fmt.Errorf("expect %q: want %s or %s", a.Expect, Blocked, Allowed)
	case a.Subagent != "" && a.Subagent != "net" && a.Subagent != "gw":
		return fmt.Errorf("subagent %q: want net, gw or nothing", a.Subagent)
	case a.Needs != "" && a.Needs != NeedsDiskQuota:
		return fmt.Errorf("needs %q: want %s", a.Needs, NeedsDiskQuota)
	}
	switch a.Observe {
	case ObserveReport, ObserveSecret, ObserveListener, ObserveDropfile, ObserveProcess:
		if a.Arg != "" {
			return fmt.Errorf("observe %s takes no argument", a.Observe)
		}
	case ObserveReason, ObserveState, ObservePatch, ObserveOutput:
		if a.Arg == "" {
			return fmt.Errorf("observe %s needs an argument", a.Observe)
		}
	case ObserveLogs:
		if _, err := logsLimit(a.Arg); err != nil {
			return fmt.Errorf("observe %s: %w", a.Observe, err)
		}
	default:
		return validHostObservation(a.Observe, a.Arg)
	}
	return nil
}

// NeedsDiskQuota is the isolation a dispatch's record shows when its disk quota is
// enforced (agora runs as root and mounts the tmpfs).
const NeedsDiskQuota = "disk-quota"

// Select keeps the attacks whose id matches re (nil keeps all).
func Select(all []Attack, re *regexp.Regexp) []Attack {
	if re == nil {
		return all
	}
	var out []Attack
	for _, a := range all {
		if re.MatchString(a.ID) {
			out = append(out, a)
		}
	}
	return out
}
