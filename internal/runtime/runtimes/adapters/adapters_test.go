package adapters

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// TestAdapters_Generated: the worker's table is runtimes.All's line made into adapters, so a
// runtime is registered once (`go generate ./internal/runtime/runtimes/adapters` after
// adding its line).
func TestAdapters_Generated(t *testing.T) {
	want, err := exec.Command("go", "run", "./gentable", "-o", "-").Output()
	if err != nil {
		t.Fatalf("go run ./gentable: %v%s", err, stderrOf(err))
	}
	got, err := os.ReadFile("adapters_gen.go")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("adapters_gen.go is not what runtimes.All makes (%v): run `go generate ./internal/runtime/runtimes/adapters`\nwant:\n%s", err, want)
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return ":\n" + string(ee.Stderr)
	}
	return ""
}

// TestAdapters_EveryRuntime: each runtime runtimes describes has an adapter, in All's order,
// and a name it does not describe has none.
func TestAdapters_EveryRuntime(t *testing.T) {
	var names []string
	for _, e := range table() {
		names = append(names, e.name)
		if e.adapter == nil {
			t.Errorf("runtime %q: nil adapter", e.name)
		}
	}
	if !slices.Equal(names, runtimes.Names()) {
		t.Errorf("the table lists %q, runtimes.All %q", names, runtimes.Names())
	}
	for _, name := range runtimes.Names() {
		if _, ok := For(name); !ok {
			t.Errorf("For(%q): no adapter", name)
		}
	}
	if _, ok := For("shell"); ok {
		t.Error("For(shell) found an adapter, want none")
	}
}

// TestAdapters_AtMostOneHook: `agora-worker worker hook` names no runtime, so at most one
// runtime may have a hook, and Hook returns it.
func TestAdapters_AtMostOneHook(t *testing.T) {
	var hooks []string
	for _, e := range table() {
		if _, ok := e.adapter.(agentrun.Hooker); ok {
			hooks = append(hooks, e.name)
		}
	}
	if len(hooks) > 1 {
		t.Fatalf("runtimes %q each have a tool hook; `agora-worker worker hook` must name the runtime before a second one can", hooks)
	}
	if (len(hooks) == 1) != (Hook() != nil) {
		t.Errorf("Hook() = %v with hooks %q", Hook(), hooks)
	}
}
