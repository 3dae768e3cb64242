package cli

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
)

// completeWithin bounds a completion's reads: a shell waits for it on every TAB.
const completeWithin = 2 * time.Second

// A completer lists the candidates of one argument or flag from AGORA_HOME. It never
// creates AGORA_HOME, never writes, and answers nothing (not an error) when the home or
// serve is not there: completion is a convenience, and the shell falls back to files.
type completer func(ctx context.Context, f *cmdutil.Factory) []string

// addCompletions gives the commands that take catalog names, targets, dispatch ids or run
// ids their completion: the argument by command path, the flags by name wherever they exist.
func addCompletions(f *cmdutil.Factory, root *cobra.Command) {
	args := map[string]completer{}
	for _, k := range []catalog.Kind{catalog.KindCapability, catalog.KindSubagent, catalog.KindEnv, catalog.KindWorkspace} {
		for _, verb := range []string{"show", "history"} {
			args["agora "+string(k)+" "+verb] = catalogNames(k)
		}
	}
	args["agora subagent assign"] = catalogNames(catalog.KindSubagent)
	for _, verb := range []string{"describe", "logs", "patch", "outputs", "cancel", "resume", "approve", "deny"} {
		args["agora dispatch "+verb] = dispatchIDs
	}
	for _, verb := range []string{"status", "watch", "cancel", "answer", "retry", "seal", "patches", "audit"} {
		args["agora orch "+verb] = runIDs
	}
	flags := map[string]completer{
		"subagent":  catalogNames(catalog.KindSubagent),
		"env":       catalogNames(catalog.KindEnv),
		"workspace": catalogNames(catalog.KindWorkspace),
		"target":    targetNames,
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if fn, ok := args[c.CommandPath()]; ok {
			c.ValidArgsFunction = complete(f, fn, true)
		}
		for name, fn := range flags {
			if c.LocalFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, complete(f, fn, false))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// complete adapts fn to cobra: candidates starting with what was typed; a positional
// argument completes only the first.
func complete(f *cmdutil.Factory, fn completer, firstOnly bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if firstOnly && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completeWithin)
		defer cancel()
		var out []string
		for _, c := range fn(ctx, f) {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// existingHome opens AGORA_HOME only if it exists: completing never initialises one.
func existingHome(ctx context.Context, f *cmdutil.Factory) *home.Home {
	dir, err := f.HomeDir()
	if err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, home.DBFile)); err != nil {
		return nil
	}
	h, err := f.Home(ctx)
	if err != nil {
		return nil
	}
	return h
}

func catalogNames(kind catalog.Kind) completer {
	return func(ctx context.Context, f *cmdutil.Factory) []string {
		h := existingHome(ctx, f)
		if h == nil {
			return nil
		}
		vs, err := view.New(h.DB, h.Blobs).List(ctx, kind)
		if err != nil {
			return nil
		}
		var names []string
		for _, v := range vs {
			names = append(names, v.Name)
		}
		slices.Sort(names)
		return slices.Compact(names)
	}
}

func targetNames(ctx context.Context, f *cmdutil.Factory) []string {
	dir, err := f.HomeDir()
	if err != nil {
		return nil
	}
	c, err := config.Load(dir)
	if err != nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(c.Targets))
	return names
}

func dispatchIDs(ctx context.Context, f *cmdutil.Factory) []string {
	h := existingHome(ctx, f)
	if h == nil {
		return nil
	}
	rs, err := dispatch.NewRecords(h.DB, nil, f.Now).List(ctx, dispatch.ListFilter{Limit: 200})
	if err != nil {
		return nil
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// runIDs asks serve: only it opens orch.db. Names complete too (a run is named by either).
func runIDs(ctx context.Context, f *cmdutil.Factory) []string {
	c, err := f.OrchClient(ctx)
	if err != nil {
		return nil
	}
	runs, err := c.Runs(ctx, 200)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range runs {
		out = append(out, r.ID, r.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
