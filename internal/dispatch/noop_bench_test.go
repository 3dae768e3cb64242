package dispatch_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// BenchmarkDispatch_NoopResident is a no-op dispatch (the subagent runs `true`) through a
// resident Dispatcher, Accept to the recorded end: what `orch serve` and the MCP server pay
// per dispatch, with nothing per process (no Go start, no agora.db open, no keys). Beside it,
// in the same run, a namespaced `bwrap true` (the sandbox's namespaces, /usr, /proc, /dev and
// a tmpfs /tmp), the floor of the target "<= 3x a namespaced bwrap".
//
// "warm" is the same dispatch claiming a warm slot, measured in the same run, back to
// back; "warm-idle" the same with the holder idle before each (see there).
//
//	go test ./internal/dispatch -run '^$' -bench 'Dispatch_NoopResident' -benchtime 40x -count 3 -benchmem
func BenchmarkDispatch_NoopResident(b *testing.B) {
	b.Run("dispatch", func(b *testing.B) {
		e := newEnv(b)
		noopSubagent(b, e)
		// One dispatch before the timer: the first of a process pins the worker build (reads,
		// checks, hashes and copies its 13 MB, once per build and AGORA_HOME), which the
		// per-dispatch figures must not spread over the loop (most of the
		// "2.7 MB per dispatch" was this one pin).
		if r := e.run(dispatch.Request{Subagent: "noop"}); r.State != lifecycle.DispatchFinished {
			b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
		}
		for b.Loop() {
			r := e.run(dispatch.Request{Subagent: "noop"})
			if r.State != lifecycle.DispatchFinished {
				b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		// The same no-op in a warm slot: the target keeps 2 slots; the timer stops while
		// the refill catches up, so each timed dispatch claims a started slot (a dispatch that
		// found none would go cold and be counted: the loop fails then).
		e, w := warmEnv(b, 2)
		noopSubagent(b, e)
		if r := e.run(dispatch.Request{Subagent: "noop"}); r.State != lifecycle.DispatchFinished {
			b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
		}
		for b.Loop() {
			b.StopTimer()
			waitWarmReady(b, w, 1)
			b.StartTimer()
			r := e.run(dispatch.Request{Subagent: "noop"})
			if r.State != lifecycle.DispatchFinished {
				b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
			}
		}
		if c := warmCounts(w); c.Cold != 0 {
			b.Fatalf("%d dispatches went cold: %+v", c.Cold, c)
		}
	})
	b.Run("warm-idle", func(b *testing.B) {
		// The same warm no-op arriving at an idle holder: the timer stops until both slots are
		// ready and what the previous dispatch left to the background (its slot's and stage's
		// teardown, after its end) is done, so the dispatch shares the cores with nothing of
		// agora's. "warm" above times dispatches back to back, each behind the last one's
		// teardown and a refill (on 2 loaded cores that work lands on the next dispatch).
		e, w := warmEnv(b, 2)
		noopSubagent(b, e)
		if r := e.run(dispatch.Request{Subagent: "noop"}); r.State != lifecycle.DispatchFinished {
			b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
		}
		for b.Loop() {
			b.StopTimer()
			dispatch.WaitWarmTeardowns(w)
			waitWarmReady(b, w, 2)
			b.StartTimer()
			r := e.run(dispatch.Request{Subagent: "noop"})
			if r.State != lifecycle.DispatchFinished {
				b.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
			}
		}
		if c := warmCounts(w); c.Cold != 0 {
			b.Fatalf("%d dispatches went cold: %+v", c.Cold, c)
		}
	})
	b.Run("bwrap-namespaced", func(b *testing.B) {
		requireSandbox(b)
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			b.Skip("SKIP: bwrap not in PATH")
		}
		for b.Loop() {
			c := exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
				"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
				"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true")
			if out, err := c.CombinedOutput(); err != nil {
				b.Fatalf("bwrap: %v: %s", err, out)
			}
		}
	})
}

// noopSubagent registers "noop": the command `true` under a capability that allows it, as
// bench/dispatchbench registers it for the CLI.
func noopSubagent(b testing.TB, e *env) {
	b.Helper()
	ctx := context.Background()
	capDir := b.TempDir()
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("commands: [\"true\"]\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	pc, err := e.w.PrepareCapability("noop", capDir, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.w.Register(ctx, "test", "register", pc); err != nil {
		b.Fatal(err)
	}
	p, err := e.w.PrepareSubagent(ctx, "noop", provision.SubagentSpec{Command: []string{"true"}, Capabilities: []string{"noop"}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.w.Register(ctx, "test", "register", p); err != nil {
		b.Fatal(err)
	}
}
