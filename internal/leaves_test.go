package internal_test

import (
	"slices"
	"strings"
	"testing"
)

// leaves are packages that hold one concept each and link nothing of the module beyond the
// leaves listed beside them, so both sides of the privilege boundary (the host, and the
// worker in its sandbox) may import them without pulling anything else in.
var leaves = []struct {
	pkg string
	may []string // other leaves it may link
	why string
}{
	{"internal/digest", nil, "a digest is a name for content; it knows no store"},
	{"internal/budget", nil, "budgets, prices and usage are shared by catalog, config, plans, the gateway, dispatch and the orchestrator; it depends on none of them"},
	{"internal/grant", []string{"internal/digest", "internal/cmdread", "internal/shellwords"}, "the grant is shared by catalog, dispatch, plans, toolreg and the runtimes; it depends on none of them"},
	{"internal/cmdread", []string{"internal/shellwords"}, "what an argv runs is read the same by the host and the worker, for approve rules; it depends on nothing else"},
	{"internal/hostpath", nil, "hiding host paths is shared by the web view and the MCP host; it knows neither"},
	{"internal/agenttext", nil, "escaping what an agent wrote is shared by the CLI and the web view; it knows neither"},
	{"internal/verdict", []string{"internal/strictjson", "internal/jcs"}, "a verify gate's spec and verdict are shared by plans, dispatch, the orchestrator, the CLI, MCP and the web view; it depends on none of them"},
	{"internal/lifecycle", nil, "the states of dispatches, tasks and runs and the reasons they fail are spelled once for the worker, dispatch, the orchestrator and every reader; it depends on none of them"},
	{"internal/shellwords", nil, "the one reader of the shell lines grants judge, shared by the codex runtime and the Claude Code hook; it depends on nothing"},
	{"internal/cli/words", nil, "a command line a person typed, split for the CLI; its fuzz binary links it alone, not the command tree (CI instruments and links each fuzz package's whole graph)"},
	{"internal/cli/outdir", nil, "the writer of files where a person points; its fuzz binary links it alone, not the command tree"},
}

// TestLeaves keeps the leaf packages leaves.
func TestLeaves(t *testing.T) {
	g := loadGraph(t)
	for _, l := range leaves {
		if !g.own(module + l.pkg) {
			t.Errorf("package %s not found: the leaf list is stale", l.pkg)
			continue
		}
		for _, p := range g.closure(t, module+l.pkg) {
			rel, ok := strings.CutPrefix(p, module)
			if !ok || !g.own(p) || rel == l.pkg || slices.Contains(l.may, rel) {
				continue
			}
			t.Errorf("%s imports %s (%s): %s", l.pkg, rel, strings.ReplaceAll(strings.Join(g.chain(t, module+l.pkg, rel), " → "), module, ""), l.why)
		}
	}
}
