// Package initcmd is `agora init`, the one command that creates an AGORA_HOME (agora.db, keys,
// agora.yaml); every other command refuses a home that is not there (cmdutil.GateHomes).
package initcmd

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/netgw"
)

type initOptions struct {
	f *cmdutil.Factory
	// gatewayCA also makes the network gateway's CA (keys/gateway-ca.pem and .key), which
	// replicas on a Lease share.
	gatewayCA bool
}

func NewCmd(f *cmdutil.Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{f: f}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create AGORA_HOME with its database and keys",
		Long: `Create AGORA_HOME (mode 0700) with its SQLite database, the secret sealing key
(keys/secret.key, 0600) and the audit signing key pair (keys/audit.key, 0600, and
keys/audit.pub). Every other command does this on first use; running init again changes
nothing.

--gateway-ca also makes the network gateway's CA (keys/gateway-ca.pem and keys/gateway-ca.key,
0600), which a gateway otherwise makes on its first use: serve replicas on a Lease share it
with the other keys, so that a Job made under one leader trusts the next
(docs/providers-k8s.md, "Two replicas on a Lease").`,
		Example: `  agora init
  AGORA_HOME=$PWD/ha-keys agora init --gateway-ca   # the keys of a two-replica deployment`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCmd(cmd, opts, runF, initRun)
		},
	}
	cmd.Flags().BoolVar(&opts.gatewayCA, "gateway-ca", false, "also make the network gateway's CA in keys/ (shared by serve replicas on a Lease)")
	return cmd
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
	if opts.gatewayCA {
		keys := filepath.Join(dir, home.KeyDir)
		made, err := netgw.EnsureCA(keys)
		if err != nil {
			return err
		}
		if made {
			created = append(created, filepath.Join(keys, netgw.CACertFile))
		}
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
