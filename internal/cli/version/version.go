// Package version is `agora version`: the build information the Go toolchain embedded, for
// people or as JSON (internal/version reads it).
package version

import (
	"context"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/version"
)

type versionOptions struct {
	cmdutil.PrintOptions
	read func() (*debug.BuildInfo, bool)
}

func NewCmd(f *cmdutil.Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{PrintOptions: cmdutil.PrintOptions{F: f}, read: debug.ReadBuildInfo}
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "version",
		Short: "Print agora's version, commit and Go version",
		Long: `Print the module version, the VCS commit and its time, and the Go version the binary was
built with, from the build information the Go toolchain embeds. A build from a checkout
says "(devel)" with the commit; "+modified" marks a tree that had uncommitted changes. A
binary built without VCS information (go run, go build -buildvcs=false, outside a git
checkout) says so instead of a commit.`,
		Example: `  agora version --output json`,
		Args:    cmdutil.NoArgs,
	}, opts, runF, versionRun)
}

func versionRun(_ context.Context, opts *versionOptions) error {
	bi, _ := opts.read()
	v := version.From(bi)
	if opts.Output == cmdutil.FormatJSON {
		return v.WriteJSON(opts.F.IO.Out)
	}
	_, err := io.WriteString(opts.F.IO.Out, v.Text())
	return err
}
