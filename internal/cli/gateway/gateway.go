// Package gateway is `agora gateway serve`: the network gateway remote workers (a kubernetes
// target's pods) reach this host through, run in the foreground. The gateway itself is the
// composition root's (the factory's NetworkGateway): it needs the home's dispatcher and
// replicas, and agora orch serve --gateway runs the same one.
package gateway

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/netgw"
)

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the network gateway remote workers reach agora through",
		Long: `The network gateway is how a worker on another machine (a kubernetes target's pod)
reaches this host: one TLS listener, a token per dispatch scoped to its own routes and
revoked at its end. It moves bytes only: the model gateway, the egress proxy and every
decision stay with each dispatch's supervisor on this host.`,
		Args: cmdutil.NoArgs,
	}
	cmd.AddCommand(newGatewayServeCmd(f, nil))
	return cmd
}

// gatewayServeOptions are agora gateway serve's flags.
type gatewayServeOptions struct {
	f         *cmdutil.Factory
	listen    string
	advertise string
}

func newGatewayServeCmd(f *cmdutil.Factory, runF func(*gatewayServeOptions) error) *cobra.Command {
	opts := &gatewayServeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the network gateway in the foreground",
		Long: `Run the network gateway until SIGINT or SIGTERM.

It listens with TLS 1.3 on --listen (default: gateway.listen in agora.yaml) with a server
certificate for the host of --advertise (default: gateway.advertise), issued by the gateway's
own CA in AGORA_HOME/keys/gateway-ca.pem: the certificate pods trust. Sessions are those
the dispatches' supervisors register in AGORA_HOME/gateway/sessions.`,
		Example: `  agora gateway serve --listen 0.0.0.0:8443 --advertise https://10.0.0.5:8443`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.advertise != "" {
				if _, err := netgw.AdvertisedHost(opts.advertise); err != nil {
					return cmdutil.UsageErrorf(cmd, "--advertise: %v", err)
				}
			}
			return cmdutil.RunCmd(cmd, opts, runF, gatewayServeRun)
		},
	}
	cmd.Flags().StringVar(&opts.listen, "listen", "", "address to listen on, HOST:PORT (default: gateway.listen)")
	cmd.Flags().StringVar(&opts.advertise, "advertise", "", "URL pods reach the gateway at, https://HOST:PORT (default: gateway.advertise)")
	return cmd
}

func gatewayServeRun(ctx context.Context, opts *gatewayServeOptions) error {
	serve, err := opts.f.NetworkGateway(ctx, opts.listen, opts.advertise)
	if err != nil {
		return err
	}
	err = serve(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(opts.f.IO.ErrOut, "agora: gateway stopped")
		return nil
	}
	return err
}
