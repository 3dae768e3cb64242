package dispatch_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// warmEnv is an env whose local target keeps n warm slots, held by a resident Dispatcher.
func warmEnv(t testing.TB, n int) (*env, *dispatch.WarmPools) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	e := newEnv(t)
	tg := e.d.Config.Targets[config.DefaultTarget]
	tg.Warm = n
	e.d.Config.Targets[config.DefaultTarget] = tg
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v", w, err)
	}
	t.Cleanup(w.Close)
	return e, w
}

func warmCounts(w *dispatch.WarmPools) warm.Counts {
	for _, c := range w.Counts() {
		if c.Target == config.DefaultTarget {
			return c
		}
	}
	return warm.Counts{}
}

func waitWarmReady(t testing.TB, w *dispatch.WarmPools, n int) {
	t.Helper()
	// 45 s, not a speed bound: under CI's -race on a loaded machine a fill can take more
	// than 20 s. If it ever does not come, the goroutines say where the fill sits.
	deadline := time.Now().Add(45 * time.Second)
	for warmCounts(w).Ready < n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines while the fill did not come:\n%s", buf[:runtime.Stack(buf, true)])
			t.Fatalf("warm slots: %+v, want %d ready", warmCounts(w), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWarm_DispatchRunsInSlot: the first dispatch of a target starts cold and teaches the
// pool its shape; the next claims a started slot and ends exactly as the cold one did
// (state, output, patch); a dispatch of another shape (another timeout) spends nothing of
// the pool's shape and starts cold, counted.
func TestWarm_DispatchRunsInSlot(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.subagent("hello", `echo "out:$(id -u)" ; echo made > hello.txt`)
	if c := warmCounts(w); c.Want != 1 || c.Ready != 0 {
		t.Fatalf("before any dispatch: %+v", c)
	}
	cold := e.run(dispatch.Request{Subagent: "hello"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "hello"})
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	}
	c := warmCounts(w)
	if c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("after the warm dispatch: %+v, want claimed 1 cold 0", c)
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
	if !strings.Contains(e.patch(hot), "+made") || !strings.Contains(e.patch(cold), "+made") {
		t.Errorf("patches: cold %q, warm %q", e.patch(cold), e.patch(hot))
	}
	// Another shape: the dispatch starts cold and the mismatch is counted.
	waitWarmReady(t, w, 1)
	other := e.run(dispatch.Request{Subagent: "hello", Timeout: 31 * time.Second})
	if other.State != lifecycle.DispatchFinished {
		t.Fatalf("other shape: %s %s %s", other.State, other.Reason, other.Detail)
	}
	if c := warmCounts(w); c.Claimed != 2 || c.Cold != 1 {
		t.Fatalf("after a dispatch of another shape: %+v, want claimed 2 (the spent slot), cold 1", c)
	}
	// That cold dispatch is the new template: the pool refills with its shape, and the next
	// dispatch of it runs warm.
	waitWarmReady(t, w, 1)
	again := e.run(dispatch.Request{Subagent: "hello", Timeout: 31 * time.Second})
	if again.State != lifecycle.DispatchFinished {
		t.Fatalf("new shape: %s %s %s", again.State, again.Reason, again.Detail)
	}
	if c := warmCounts(w); c.Claimed != 3 || c.Cold != 1 {
		t.Fatalf("after a dispatch of the new shape: %+v, want claimed 3, cold 1", c)
	}
}
