// Package selftest is `agora selftest`: it attacks this host's sandboxes with agora's corpus
// (internal/selftest), in a throw-away home with this host's target, and shows each boundary holds.
package selftest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/selftest"
	"github.com/agora-dev/agora/internal/version"
	"github.com/agora-dev/agora/internal/workerbin"
)

type selftestOptions struct {
	f       *cmdutil.Factory
	targets []string
	output  string
	run     string
	list    bool
	jobs    int
	// Agora is the agora program the runner drives; nil finds the one running.
	Agora func() (string, error)
	// Environ is the environment the runner's agora commands start from.
	Environ func() []string
}

const selftestLong = `Run agora's attack corpus against the targets of this home, and show that each boundary
holds on this host: every attack blocked, every legitimate operation working.

Each attack is a real dispatch with the real worker under the target's own settings (its
sandbox, network, limits and the egress proxy's settings, copied from this home's agora.yaml),
in a throw-away home selftest makes in the temporary directory with its own catalog of attack
subagents and removes after. This home's catalog is never touched; its audit log gains one
selftest.run entry per target with the summary and a digest of the table.

An attack counts as blocked only when its program ran (it writes a canary of this run first)
and agora's record or a host-side probe shows the boundary held: the dispatch's reason, its
patch and outputs, a secret the program could only read across the boundary, a listener on
the host's loopback, a host directory it may not write, host processes left behind. A row
whose control this host cannot enforce (the disk quota without root) says "not-enforced" and
names agora doctor's fix; it is never a pass. The corpus, with each attack's threat and
reason, is in docs/selftest.md.

Every provider is attacked: bubblewrap (local), docker and kubernetes targets. A container or
a pod does not have the host's paths at all; a row blocked for that reason says so. Attacks
run --jobs at a time, each with host probes of its own; the table keeps the corpus's order.
Exit 0 when every row passed, 5 when any did not.`

func NewCmd(f *cmdutil.Factory, runF func(*selftestOptions) error) *cobra.Command {
	opts := &selftestOptions{f: f, Agora: selfProgram, Environ: os.Environ}
	cmd := &cobra.Command{
		Use:   "selftest [--target NAME] [--run REGEX] [--jobs N] [--list] [--output json]",
		Short: "Attack this host's sandboxes with agora's corpus and show each boundary holds",
		Long:  selftestLong,
		Example: `  agora selftest
  agora selftest --target local --output json
  agora selftest --run '^net-' --list`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			if _, err := regexp.Compile(opts.run); err != nil {
				return cmdutil.UsageErrorf(cmd, "--run: %v", err)
			}
			if opts.jobs < 1 || opts.jobs > selftest.MaxJobs {
				return cmdutil.UsageErrorf(cmd, "--jobs %d: want 1 to %d", opts.jobs, selftest.MaxJobs)
			}
			return cmdutil.RunCmd(cmd, opts, runF, selftestRun)
		},
	}
	cmd.Flags().StringSliceVar(&opts.targets, "target", nil, "the targets to attack (default: every target of this home's agora.yaml)")
	cmd.Flags().StringVar(&opts.run, "run", "", "only the attacks whose id matches this regular expression")
	cmd.Flags().IntVar(&opts.jobs, "jobs", selftest.DefaultJobs, "how many attacks run at once (1: one after another)")
	cmd.Flags().BoolVar(&opts.list, "list", false, "list the attacks (id, class, expected, control, reason) and run none")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

// selfProgram is the agora program this process runs as, as the person invoked it.
func selfProgram() (string, error) {
	p := os.Args[0]
	if !strings.Contains(p, "/") {
		return exec.LookPath(p)
	}
	return filepath.Abs(p)
}

// selftestResult is the JSON shape of selftest.
type selftestResult struct {
	Reports []*selftest.Report `json:"reports"`
	OK      bool               `json:"ok"`
}

func selftestRun(ctx context.Context, opts *selftestOptions) error {
	all, err := selftest.Corpus()
	if err != nil {
		return err
	}
	var re *regexp.Regexp
	if opts.run != "" {
		re = regexp.MustCompile(opts.run)
	}
	attacks := selftest.Select(all, re)
	if opts.list {
		return listAttacks(opts, attacks)
	}
	if bi, ok := debug.ReadBuildInfo(); ok && version.From(bi).Weakened() {
		// The rows its weakened controls stop are seen allowed: the run says why first.
		fmt.Fprintf(opts.f.IO.ErrOut, "agora selftest: this agora is %s\n", version.WeakenedWords)
	}
	if len(attacks) == 0 {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitUsage, Err: fmt.Errorf("--run %q matches no attack (agora selftest --list shows them)", opts.run)}
	}
	h, err := opts.f.Home(ctx)
	if err != nil {
		return err
	}
	targets, err := selftestTargets(h.Config, opts.targets)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(h.Dir, config.FileName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read agora.yaml: %w", err)
	}
	res := selftestResult{Reports: []*selftest.Report{}, OK: true}
	for _, name := range targets {
		rep, err := selftestTarget(ctx, opts, h.Config, h.Dir, raw, name, attacks)
		if err != nil {
			return fmt.Errorf("selftest %s: %w", name, err)
		}
		if err := recordSelftest(ctx, opts.f, rep, opts.run, len(all)); err != nil {
			return fmt.Errorf("record selftest %s in the audit log: %w", name, err)
		}
		res.Reports = append(res.Reports, rep)
		res.OK = res.OK && rep.OK()
	}
	if err := writeSelftest(opts, res); err != nil {
		return err
	}
	if !res.OK {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitCheckFailed, Err: errors.New("selftest: a boundary did not hold, an attack did not run, or this host does not enforce a control (the rows marked FAIL)")}
	}
	return nil
}

// selftestTargets are the targets to attack: those asked for, else every target of this
// home's agora.yaml, each checked to exist.
func selftestTargets(c *config.Config, asked []string) ([]string, error) {
	names := asked
	if len(names) == 0 {
		for n := range c.Targets {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	for _, n := range names {
		if _, err := c.Target(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// selftestTarget runs the corpus on one target, its progress on stderr.
func selftestTarget(ctx context.Context, opts *selftestOptions, c *config.Config, dir string, raw []byte, name string, attacks []selftest.Attack) (*selftest.Report, error) {
	t, err := c.Target(name)
	if err != nil {
		return nil, err
	}
	// A kubernetes target's pods reach agora through a network gateway: the throw-away home
	// serves its own, on the person's gateway host and a port of its own.
	var gw *selftest.Gateway
	if t.Provider == config.ProviderKubernetes {
		if gw, err = selftest.PodGateway(c.Gateway.Listen, cmp.Or(t.Gateway, c.Gateway.Advertise)); err != nil {
			return nil, fmt.Errorf("target %s: %w", name, err)
		}
		defer gw.Close() // its port, if no gateway took it over
	}
	gwURL := ""
	if gw != nil {
		gwURL = gw.Advertise
	}
	yml, err := selftest.ConfigWithGateway(raw, name, gwURL)
	if err != nil {
		return nil, err
	}
	configured, err := c.WorkerBinary(opts.f.Getenv)
	if err != nil {
		return nil, err
	}
	agora, err := opts.Agora()
	if err != nil {
		return nil, fmt.Errorf("find the agora program to drive: %w", err)
	}
	// The worker program the throw-away home's dispatches start from: the configured one,
	// else agora-worker beside the agora program the runner drives.
	worker, err := workerbin.Locate(agora, configured)
	if err != nil {
		return nil, err
	}
	return selftest.Run(ctx, selftest.Options{
		Agora: agora, Env: opts.Environ(), Home: dir, Target: name, Provider: cmp.Or(t.Provider, config.ProviderLocal),
		Config: yml, Worker: worker, Memory: int64(t.Memory), Disk: int64(t.Disk), Attacks: attacks,
		Gateway: gw, Jobs: opts.jobs, Progress: opts.f.IO.ErrOut,
	})
}

// recordSelftest appends the run's selftest.run entry to this home's audit log. A run of part
// of the corpus (--run) says so, in its summary too: a slice that passes is not the corpus
// passing.
func recordSelftest(ctx context.Context, f *cmdutil.Factory, rep *selftest.Report, run string, corpus int) error {
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	f.Wrote = true
	ran := len(rep.Rows)
	summary := rep.Summary()
	if ran < corpus {
		summary += fmt.Sprintf(" (%d of the corpus's %d attacks: --run %s)", ran, corpus, run)
	}
	e := audit.Entry{Actor: f.Actor(), Kind: entry.SelftestRun, Subject: entry.SelftestTarget(rep.Target), Details: map[string]any{
		"target": rep.Target, "summary": summary, "digest": rep.Digest, "attacks": rep.Attacks, "blocked": rep.Blocked,
		"legitimate": rep.Legit, "allowed": rep.Allowed, "not_enforced": rep.Unenforc, "not_run": rep.NotRun, "failed": rep.Failed,
		"milliseconds": rep.Elapsed.Milliseconds(), "run": run, "rows": ran, "corpus": corpus,
	}}
	return h.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(f.Now).Append(ctx, tx, e)
		return err
	})
}

func writeSelftest(opts *selftestOptions, res selftestResult) error {
	out := opts.f.IO.Out
	if opts.output == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(out, res)
	}
	for _, rep := range res.Reports {
		if err := rep.WriteTable(out); err != nil {
			return err
		}
	}
	return nil
}

// listAttacks prints the corpus: one row per attack.
func listAttacks(opts *selftestOptions, attacks []selftest.Attack) error {
	if opts.output == cmdutil.FormatJSON {
		type item struct {
			ID       string `json:"id"`
			Class    string `json:"class"`
			Expected string `json:"expected"`
			Control  string `json:"control"`
			Observe  string `json:"observe"`
			Reason   string `json:"reason"`
		}
		items := make([]item, 0, len(attacks))
		for _, a := range attacks {
			items = append(items, item{a.ID, a.Class, a.Expect, a.Control, strings.TrimSpace(a.Observe + " " + a.Arg), a.Reason})
		}
		return cmdutil.WriteJSON(opts.f.IO.Out, items)
	}
	tw := tabwriter.NewWriter(opts.f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTACK\tCLASS\tEXPECTED\tCONTROL\tOBSERVED BY\tREASON")
	for _, a := range attacks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Class, a.Expect, a.Control, strings.TrimSpace(a.Observe+" "+a.Arg), a.Reason)
	}
	return tw.Flush()
}
