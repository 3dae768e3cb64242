package dispatch_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam28S3_SupervisorKilledAtManyPoints kills (SIGKILL) the real `agora dispatch
// supervise` of a short dispatch at many points of its life, the no-op path's fast
// parts (the phase file written in place, the record reads through prepared
// statements, the pin taken on two stats), then reaps (or, killed before it claimed the
// dispatch, supervises it again). Each dispatch ends in one final
// state; its record and its audit entries agree (one accepted, a started entry exactly
// when the record says it started, one end entry of the record's final state); and the
// exported log verifies with agora verify.
func TestRedTeam28S3_SupervisorKilledAtManyPoints(t *testing.T) {
	e := newEnv(t)
	e.subagent("quick", "echo hi; sleep 0.05")
	var ids []string
	for _, delay := range []time.Duration{0, 1, 3, 6, 10, 15, 25, 40, 60, 90, 130, 200} {
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "quick", Actor: "test", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
		sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
		if err := sup.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay * time.Millisecond)
		sup.Process.Kill()
		sup.Wait()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := e.d.Reap(t.Context()); err != nil {
				t.Fatal(err)
			}
			cur, err := e.d.Records.Get(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.State != lifecycle.DispatchAccepted && cur.State != lifecycle.DispatchStarted {
				break
			}
			if cur.State == lifecycle.DispatchAccepted {
				// Killed before it claimed the dispatch: the record still names this test
				// process (which accepted it) as its supervisor, alive, so nothing reaps it.
				// A new supervisor takes it up and runs it to its end.
				again := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
				again.Env = sup.Env
				if out, err := again.CombinedOutput(); err != nil {
					t.Logf("killed after %d ms, supervised again: %v %s", delay, err, out)
				}
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed after %d ms: still %s after reaping for 20 s", delay, cur.State)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	recs, err := audit.List(t.Context(), e.home.DB.SQL(), audit.ListOptions{Kind: "dispatch.*"})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, r := range recs {
		kinds[r.Subject] = append(kinds[r.Subject], r.Kind)
	}
	seen := map[string]int{}
	for _, id := range ids {
		cur, err := e.d.Records.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		seen[cur.State+"/"+cur.Reason]++
		ks := kinds[entry.Dispatch(id)]
		count := func(k string) int {
			n := 0
			for _, x := range ks {
				if x == k {
					n++
				}
			}
			return n
		}
		ends := 0
		for _, k := range ks {
			if dispatch.DispatchEnd(k) {
				ends++
			}
		}
		want := map[string]int{entry.DispatchAccepted: 1, entry.DispatchState(cur.State): 1}
		if cur.StartedAt != nil {
			want[entry.DispatchStarted] = 1
		} else {
			want[entry.DispatchStarted] = 0
		}
		for k, n := range want {
			if got := count(k); got != n {
				t.Errorf("dispatch %s (%s %s, started %v): %d %s entries, want %d; all: %v", id, cur.State, cur.Reason, cur.StartedAt != nil, got, k, n, ks)
			}
		}
		if ends != 1 {
			t.Errorf("dispatch %s: %d end entries, want 1: %v", id, ends, ks)
		}
	}
	t.Logf("final states: %v", seen)
	if out, err := e.approvalCLI("audit", "checkpoint"); err != nil {
		t.Fatalf("audit checkpoint: %v\n%s", err, out)
	}
	bundle := t.TempDir() + "/audit.json"
	if out, err := e.approvalCLI("audit", "export", "--out", bundle); err != nil {
		t.Fatalf("audit export: %v\n%s", err, out)
	}
	out, err := e.approvalCLI("verify", bundle, "--key", e.home.Dir+"/keys/audit.pub")
	if err != nil || !strings.Contains(out, "tier") {
		t.Errorf("agora verify of the log after %d killed supervisors: %v\n%s", len(ids), err, out)
	}
}
