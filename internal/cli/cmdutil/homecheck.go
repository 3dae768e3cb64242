package cmdutil

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/home"
)

// HomeFree lists, in one place, the commands that run without an initialised AGORA_HOME, and
// why. Every other command refuses a missing or uninitialised home before it opens or creates
// anything ([Factory.RequireHome]): only 'agora init' makes a home, so a mistyped AGORA_HOME is
// an error naming the path, never a new, empty catalog that silently lists nothing.
func HomeFree() map[string]string {
	return map[string]string{
		"agora init":          "it creates the home",
		"agora version":       "it prints the build",
		"agora help":          "it prints help",
		"agora completion":    "it prints a shell script; completing itself never opens a missing home",
		"agora doctor":        "it checks the host, before there is a home (agora.yaml is read when present)",
		"agora verify":        "it checks an exported bundle, which may come from another machine",
		"agora restore":       "it makes a new home (--to) from a replica, after the old one was lost",
		"agora orch validate": "it checks a plan's structure anywhere (CI); the catalog too when the home exists",
		"agora mcp":           "a client started it: it serves anyway and answers every request with the refusal, so the client shows it",
	}
}

// NeedsHome reports whether cmd refuses a missing home.
func NeedsHome(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if _, ok := HomeFree()[c.CommandPath()]; ok {
			return false
		}
	}
	return true
}

// homeGateKey holds, in a command's context, the factory whose home it must find initialised.
type homeGateKey struct{}

// GateHomes makes every runnable command below root that needs a home refuse a missing one:
// [RunCmd] checks it after the command line is parsed and validated (a wrong command line is
// still a usage error) and before the command does anything.
func GateHomes(f *Factory, root *cobra.Command) {
	for _, c := range root.Commands() {
		GateHomes(f, c)
	}
	if root.RunE == nil || !NeedsHome(root) {
		return
	}
	run := root.RunE
	root.RunE = func(cmd *cobra.Command, args []string) error {
		cmd.SetContext(context.WithValue(cmd.Context(), homeGateKey{}, f))
		return run(cmd, args)
	}
}

// checkHomeGate is [RunCmd]'s check: the home of a gated command must exist.
func checkHomeGate(cmd *cobra.Command) error {
	f, ok := cmd.Context().Value(homeGateKey{}).(*Factory)
	if !ok {
		return nil
	}
	return f.RequireHome()
}

// RequireHome returns a [*home.MissingError] (naming the path and 'agora init') unless
// AGORA_HOME is an initialised home.
func (f *Factory) RequireHome() error {
	dir, err := f.HomeDir()
	if err != nil {
		return err
	}
	return home.CheckInitialised(dir)
}
