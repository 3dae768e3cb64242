package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

func quietFactory(t *testing.T) *cmdutil.Factory {
	t.Helper()
	f := NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, func(string) string { return "" })
	t.Cleanup(func() { f.Close() })
	return f
}

// paths lists every command path under c, depth first.
func paths(c *cobra.Command) []string {
	var out []string
	for _, sub := range c.Commands() {
		out = append(out, sub.CommandPath())
		out = append(out, paths(sub)...)
	}
	return out
}

func groupNames(root *cobra.Command) []string {
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	return names
}

// TestRootFor_BuildsOnlyTheNamedGroup: a command line whose first word names one of
// agora's command groups builds that group alone, the same subtree the whole tree holds; every
// other command line (none, a flag first, help, completion, a typo) builds the whole tree, so
// the root's help, cobra's suggestions and completion see every command.
func TestRootFor_BuildsOnlyTheNamedGroup(t *testing.T) {
	f := quietFactory(t)
	full := NewRootCmd(f)
	names := groupNames(full)
	if !strings.Contains(full.Long, "\n\nExit codes:\n") {
		t.Errorf("the root's help has no exit codes:\n%s", full.Long)
	}
	if len(names) < 10 {
		t.Fatalf("the whole tree has %d groups: %v", len(names), names)
	}
	for _, g := range full.Commands() {
		root := rootFor(f, []string{g.Name(), "--help"})
		if got := groupNames(root); !slices.Equal(got, []string{g.Name()}) {
			t.Errorf("rootFor(%s --help) built groups %v, want %s alone", g.Name(), got, g.Name())
			continue
		}
		if got, want := paths(root), append([]string{g.CommandPath()}, paths(g)...); !slices.Equal(got, want) {
			t.Errorf("rootFor(%s): subtree\n%v\nwant the whole tree's\n%v", g.Name(), got, want)
		}
	}
	for _, args := range [][]string{
		nil, {"--help"}, {"--actor", "ci", "dispatch", "list"}, {"--actor=ci", "version"}, {"help", "dispatch"},
		{"completion", "bash"}, {cobra.ShellCompRequestCmd, "dispatch", ""}, {cobra.ShellCompNoDescRequestCmd, "orch", ""},
		{"dispach", "run"}, {""},
	} {
		if got := groupNames(rootFor(f, args)); !slices.Equal(got, names) {
			t.Errorf("rootFor(%q) built groups %v, want the whole tree's %v", args, got, names)
		}
	}
}

// TestRootFor_CompletionsOnlyWhenCompleting: the completion functions (a walk of the
// tree that builds every command's merged flag set) are registered only for a shell's
// completion request, and then on every command that takes a catalog name, id or target.
func TestRootFor_CompletionsOnlyWhenCompleting(t *testing.T) {
	f := quietFactory(t)
	find := func(root *cobra.Command, path ...string) *cobra.Command {
		t.Helper()
		c, _, err := root.Find(path)
		if err != nil || c == root {
			t.Fatalf("no command %v: %v", path, err)
		}
		return c
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"dispatch", "describe", "01M"}, false},
		{[]string{"dispatch", "run", "--subagent", "x"}, false},
		{nil, false},
		{[]string{cobra.ShellCompRequestCmd, "dispatch", "describe", ""}, true},
		{[]string{cobra.ShellCompNoDescRequestCmd, "dispatch", "run", "--subagent", ""}, true},
	} {
		root := rootFor(f, tc.args)
		describe := find(root, "dispatch", "describe")
		run := find(root, "dispatch", "run")
		_, flag := run.GetFlagCompletionFunc("subagent")
		if got := describe.ValidArgsFunction != nil; got != tc.want {
			t.Errorf("rootFor(%q): dispatch describe completes its argument: %v, want %v", tc.args, got, tc.want)
		}
		if flag != tc.want {
			t.Errorf("rootFor(%q): dispatch run completes --subagent: %v, want %v", tc.args, flag, tc.want)
		}
	}
}

// BenchmarkRootFor is what a command line pays for its command tree before it runs:
// the whole tree with completions (what every process built before), the whole tree, and the
// tree of `agora dispatch run` and of `agora version`.
func BenchmarkRootFor(b *testing.B) {
	f := NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, func(string) string { return "" })
	defer f.Close()
	for _, bc := range []struct {
		name string
		make func() *cobra.Command
	}{
		{"whole+completions", func() *cobra.Command { r := NewRootCmd(f); addCompletions(f, r); return r }},
		{"whole", func() *cobra.Command { return NewRootCmd(f) }},
		{"dispatch_run", func() *cobra.Command { return rootFor(f, []string{"dispatch", "run", "--subagent", "x"}) }},
		{"version", func() *cobra.Command { return rootFor(f, []string{"version"}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.make()
			}
		})
	}
}

// NewRootCmd builds the whole command tree, without the shell completion functions (Run adds
// them for a completion request). It holds no package-level state.
func NewRootCmd(f *cmdutil.Factory) *cobra.Command { return newRootCmd(f, "") }
