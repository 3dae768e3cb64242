package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/home"
)

type initOptions struct {
	f *Factory
}

func newInitCmd(f *Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{f: f}
	return &cobra.Command{
		Use:   "init",
		Short: "Create AGORA_HOME with its database and keys",
		Long: `Create AGORA_HOME (mode 0700) with its SQLite database, the secret sealing key
(keys/secret.key, 0600) and the audit signing key pair (keys/audit.key, 0600, and
keys/audit.pub). Every other command does this on first use; running init again changes
nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCmd(cmd, opts, runF, initRun)
		},
	}
}

func initRun(ctx context.Context, opts *initOptions) error {
	f := opts.f
	dir, err := f.HomeDir()
	if err != nil {
		return err
	}
	created, err := home.Init(ctx, dir, agoradb.Migrations())
	if err != nil {
		return err
	}
	if len(created) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: %s is already initialised\n", dir)
	}
	for _, p := range created {
		fmt.Fprintf(f.IO.ErrOut, "agora: created %s\n", p)
	}
	fmt.Fprintln(f.IO.Out, dir)
	return nil
}
