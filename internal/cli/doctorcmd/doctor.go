// Package doctorcmd is `agora doctor`: what this host can enforce for sandboxes and how to get
// the rest (internal/doctor checks), with agora.yaml's buckets and replication when a home is
// there. What it asks of providers and of the resident dispatcher comes from the composition
// root ([Probes]).
package doctorcmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/doctor"
	"github.com/agora-dev/agora/internal/home"
)

// warmHolders reads what the serves holding warm slots of a home say.
func warmHolders(stateDir string) ([]doctor.WarmHolder, error) {
	hs, err := detach.ReadHolders(stateDir)
	if err != nil {
		return nil, err
	}
	out := make([]doctor.WarmHolder, 0, len(hs))
	for _, h := range hs {
		out = append(out, doctor.WarmHolder{PID: h.PID, Counts: h.Counts})
	}
	return out, nil
}

type doctorOptions struct {
	IO     *cmdutil.IOStreams
	Output string
	Host   doctor.Host
	// Config loads agora.yaml without creating AGORA_HOME.
	Config func() (*config.Config, error)
	// Getenv reads agora's environment (AGORA_WORKER_BINARY); nil reads none.
	Getenv func(string) string
	// Warm reads the status files of the serves holding warm slots; nil reads none.
	Warm func() ([]doctor.WarmHolder, error)
	// Resident says whether the home's resident dispatcher runs (agora.yaml as loaded); nil
	// adds no row.
	Resident func(*config.Config) doctor.Check
}

// doctorResult is the JSON shape of doctor.
type doctorResult struct {
	CanDispatch bool           `json:"can_dispatch"`
	Checks      []doctor.Check `json:"checks"`
}

// Probes are what doctor asks beyond this host, built by the composition root, which knows
// the providers and the resident dispatcher.
type Probes struct {
	// Host is the host with its providers' probes (agent-sandbox, the engines).
	Host doctor.Host
	// Resident says whether the home's resident dispatcher runs.
	Resident func(*config.Config) doctor.Check
}

func NewCmd(f *cmdutil.Factory, p Probes, runF func(*doctorOptions) error) *cobra.Command {
	opts := &doctorOptions{IO: f.IO, Host: p.Host, Config: func() (*config.Config, error) {
		dir, err := f.HomeDir()
		if err != nil {
			return nil, err
		}
		return config.Load(dir)
	}, Getenv: f.Getenv, Warm: func() ([]doctor.WarmHolder, error) {
		dir, err := f.HomeDir()
		if err != nil {
			return nil, err
		}
		return warmHolders(filepath.Join(dir, home.DispatchDir))
	}, Resident: p.Resident}
	cmd := &cobra.Command{
		Use:   "doctor [--output json]",
		Short: "Check what this host can enforce for sandboxes and how to get the rest",
		Long: `Check what this host can enforce for agora's sandboxes: bubblewrap and unprivileged
user namespaces, prlimit, whether agora runs as root, the targets' sandbox uid (unused by any
account?), cgroup v2 delegation (memory.max, pids.max), the tmpfs disk quota, the agora
binary, the agora-worker beside it (the program every sandbox runs: there, and built from the
same source) and git. For a kubernetes target with backend: agent-sandbox it asks the cluster
whether agent-sandbox's Sandbox CRD is installed (naming it when not) and how many of agora's
Sandboxes are there. The last row says whether the home's resident dispatcher runs (its pid),
or what starts it. One row per check, ok or missing; a missing one is followed by the command
or setting that fixes it.

It starts one sandbox running 'true' (as the sandbox uid when root) and, as root, mounts and
unmounts a 1 MiB tmpfs; it changes nothing else and does not create AGORA_HOME. Exit 0
unless a check that every dispatch needs is missing (then 1).`,
		Example: `  agora doctor
  sudo agora doctor --output json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(cmd, opts.Output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, doctorRun)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func doctorRun(ctx context.Context, opts *doctorOptions) error {
	c, cerr := opts.Config()
	o := doctor.Options{Config: c, ConfigErr: cerr}
	if c != nil {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		if o.WorkerBinary, cerr = c.WorkerBinary(getenv); cerr != nil {
			o.Config, o.ConfigErr = nil, cerr
		}
		o.Buckets = doctorBuckets(c)
		o.Replication = doctorReplication(c, time.Now())
	}
	if opts.Warm != nil && c != nil {
		o.WarmHolders, o.WarmErr = opts.Warm()
	}
	rep := doctor.Run(ctx, opts.Host, o)
	if opts.Resident != nil && c != nil {
		rep.Checks = append(rep.Checks, opts.Resident(c))
	}
	if opts.Output == cmdutil.FormatJSON {
		if err := cmdutil.WriteJSON(opts.IO.Out, doctorResult{CanDispatch: rep.CanDispatch, Checks: rep.Checks}); err != nil {
			return err
		}
	} else if err := printDoctor(opts.IO, rep); err != nil {
		return err
	}
	if rep.CanDispatch {
		return nil
	}
	var need []string
	for _, c := range rep.Checks {
		if c.Required && c.Status != doctor.StatusOK {
			need = append(need, c.Name)
		}
	}
	return &cmdutil.ExitCodeError{Code: cmdutil.ExitError, Err: errors.New("no dispatch can run on this host until these are fixed: " + strings.Join(need, ", "))}
}

// printDoctor writes one row per check: aligned under a header with each fix on the line
// below on a terminal, else a header, then "name TAB status TAB detail TAB fix" ("-" for no
// fix).
func printDoctor(ios *cmdutil.IOStreams, rep doctor.Report) error {
	if !ios.OutTTY {
		if _, err := fmt.Fprintln(ios.Out, "CHECK\tSTATUS\tDETAIL\tFIX"); err != nil {
			return err
		}
		for _, c := range rep.Checks {
			if _, err := fmt.Fprintf(ios.Out, "%s\t%s\t%s\t%s\n", c.Name, c.Status, oneLine(c.Detail), cmdutil.OrDash(oneLine(c.Fix))); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(ios.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, oneLine(c.Detail))
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", oneLine(c.Fix))
		}
	}
	return tw.Flush()
}

// oneLine keeps a table row on one line whatever an error message held.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
