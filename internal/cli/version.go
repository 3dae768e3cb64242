package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `agora version` prints: where the binary came from, read from the
// build information the Go toolchain embeds (a release records its module version; a build
// from a checkout records the commit, its time and whether the tree was modified).
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Module    string `json:"module"`
}

// readVersion reads the binary's build information. A binary built without it (a test
// binary, a stripped build) says "unknown" rather than inventing a version.
func readVersion(read func() (*debug.BuildInfo, bool)) versionInfo {
	v := versionInfo{Version: "unknown", GoVersion: "unknown", Module: "github.com/agora-dev/agora"}
	bi, ok := read()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version // "(devel)" for a build from a checkout
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

type versionOptions struct {
	printOptions
	read func() (*debug.BuildInfo, bool)
}

func newVersionCmd(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{printOptions: printOptions{f: f}, read: debug.ReadBuildInfo}
	return newPrintCmd(&cobra.Command{
		Use:   "version",
		Short: "Print agora's version, commit and Go version",
		Long: `Print the module version, the VCS commit and its time, and the Go version the binary was
built with, from the build information the Go toolchain embeds. A build from a checkout
says "(devel)" with the commit; "+modified" marks a tree that had uncommitted changes. A
binary built without VCS information (go run, go build -buildvcs=false, outside a git
checkout) says so instead of a commit.`,
		Example: `  agora version --output json`,
		Args:    noArgs,
	}, opts, runF, versionRun)
}

func versionRun(_ context.Context, opts *versionOptions) error {
	v := readVersion(opts.read)
	return emit(opts.f.IO, opts.output, v, func(v versionInfo) error {
		_, err := io.WriteString(opts.f.IO.Out, formatVersion(v))
		return err
	})
}

// noVCS is the commit line of a binary the toolchain stamped no VCS information into.
const noVCS = "commit unknown: built without VCS information (go run, go build -buildvcs=false, or outside a git checkout)"

// formatVersion is `agora version`'s text: the version, the commit (or why there is none),
// the Go version.
func formatVersion(v versionInfo) string {
	commit := noVCS
	if v.Revision != "" {
		commit = "commit " + v.Revision
		if v.Modified {
			commit += "+modified"
		}
		commit += " (" + orDash(v.Time) + ")"
	}
	return fmt.Sprintf("agora %s\n%s\n%s\n", v.Version, commit, v.GoVersion)
}
