package catalogcmd

import (
	"fmt"
	"slices"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// HasWork reports whether a plan changes anything: a change that is not a no-op.
func HasWork(changes []provision.Change) bool {
	for _, c := range changes {
		if c.Action != catalog.ActionUnchanged {
			return true
		}
	}
	return false
}

// PrintPlan writes a deploy plan for people, a line per change (and per secret binding an
// env change moves), on stdout.
func PrintPlan(f *cmdutil.Factory, changes []provision.Change) {
	counts := map[string]int{}
	for _, c := range changes {
		counts[c.Action]++
		label := fmt.Sprintf("%s %s", c.Kind, c.Name)
		switch c.Action {
		case catalog.ActionCreate:
			fmt.Fprintf(f.IO.Out, "+ %-32s create       %s\n", label, c.Digest)
		case catalog.ActionUpdate:
			fmt.Fprintf(f.IO.Out, "~ %-32s new version  %s -> %s\n", label, c.Previous, c.Digest)
		case catalog.ActionUnchanged:
			fmt.Fprintf(f.IO.Out, "= %-32s unchanged    %s\n", label, c.Digest)
		case catalog.ActionRetire:
			fmt.Fprintf(f.IO.Out, "- %-32s retire       %s\n", label, c.Previous)
		}
		if c.Action == catalog.ActionCreate || c.Action == catalog.ActionUpdate {
			for _, line := range bindingChanges(c.PreviousBindings, c.Bindings) {
				fmt.Fprintf(f.IO.Out, "    %s\n", line)
			}
			PrintApproveNotes(f.IO.Out, "    note: ", c.ApproveNotes)
		}
	}
	fmt.Fprintf(f.IO.Out, "Plan: %d to create, %d new version(s), %d to retire, %d unchanged.\n",
		counts[catalog.ActionCreate], counts[catalog.ActionUpdate], counts[catalog.ActionRetire], counts[catalog.ActionUnchanged])
}

// bindingChanges says, a line per secret, how an env change moves where its secrets may be
// sent: bound anew, bound elsewhere, or unbound (a secret left in the bundle unbound is
// handed to the sandbox as it is).
func bindingChanges(before, after map[string]catalog.Binding) []string {
	keys := catalog.SortedKeys(after)
	for _, k := range catalog.SortedKeys(before) {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var lines []string
	for _, k := range keys {
		b, bound := after[k]
		was, wasBound := before[k]
		switch {
		case bound && !wasBound:
			lines = append(lines, fmt.Sprintf("bind   %s -> %s", k, FmtBinding(b)))
		case !bound:
			lines = append(lines, fmt.Sprintf("unbind %s (was -> %s)", k, FmtBinding(was)))
		case !slices.Equal(b.Hosts, was.Hosts) || !slices.Equal(b.Headers, was.Headers):
			lines = append(lines, fmt.Sprintf("rebind %s -> %s (was -> %s)", k, FmtBinding(b), FmtBinding(was)))
		}
	}
	return lines
}
