package selftest

import (
	"strings"
	"testing"
)

// TestDecide_NoCanaryIsNeverBlocked: a dispatch whose program never wrote this run's canary
// is not run, whatever its record or report say: an attack cannot pass by never running.
func TestDecide_NoCanaryIsNeverBlocked(t *testing.T) {
	r := &run{secret: "s3cret"}
	for _, a := range []Attack{
		{ID: "x", Expect: Blocked, Observe: ObserveReport},
		{ID: "x", Expect: Blocked, Observe: ObserveReason, Arg: "timeout"},
		{ID: "x", Expect: Blocked, Observe: ObserveListener},
		{ID: "x", Expect: Blocked, Observe: ObserveSecret},
	} {
		s := seen{rec: record{State: "failed", Reason: "timeout"}, canary: []byte("an-older-run\n"), report: []byte("refused\tno")}
		if got, _ := r.decide(a, "nonce", s); got != NotRun {
			t.Errorf("observe %s without this run's canary: seen %s, want %s", a.Observe, got, NotRun)
		}
	}
}

// TestDecide covers each observation with the canary present.
func TestDecide(t *testing.T) {
	r := &run{secret: "s3cret"}
	ran := func(report string) seen { return seen{canary: []byte("n\n"), report: []byte(report)} }
	for _, tc := range []struct {
		name string
		a    Attack
		s    seen
		want string
	}{
		{"report done", Attack{Observe: ObserveReport}, ran("done\tread it"), Allowed},
		{"report refused", Attack{Observe: ObserveReport}, ran("refused\tEACCES"), Blocked},
		{"no report", Attack{Observe: ObserveReport}, ran(""), NotRun},
		{"tool missing", Attack{Observe: ObserveReport}, ran("missing\tcurl is not installed"), NotRun},
		{"secret read", Attack{Observe: ObserveSecret}, ran("done\ts3cret"), Allowed},
		{"secret not read", Attack{Observe: ObserveSecret}, ran("done\tsomething else"), Blocked},
		{"probe hit", Attack{Observe: ObserveListener}, seen{canary: []byte("n"), probe: "reached"}, Allowed},
		{"probe quiet", Attack{Observe: ObserveListener}, seen{canary: []byte("n")}, Blocked},
		{"reason", Attack{Observe: ObserveReason, Arg: "timeout"}, seen{canary: []byte("n"), rec: record{State: "failed", Reason: "timeout"}}, Blocked},
		{"other reason", Attack{Observe: ObserveReason, Arg: "timeout"}, seen{canary: []byte("n"), rec: record{State: "finished"}}, Allowed},
		{"patch names it", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n"), patch: []byte("diff --git a/.git/hooks/x b/.git/hooks/x\n")}, Allowed},
		{"patch lacks it", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n"), patch: []byte("diff --git a/m b/m\n")}, Blocked},
		{"empty patch", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n")}, NotRun},
		{"logs capped", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\twrote 16 MiB"), logs: 4 << 20}, Blocked},
		{"logs kept whole", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\twrote 16 MiB"), logs: 16 << 20}, Allowed},
		{"logs unread", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\tx"), logs: -1}, NotRun},
		{"flood unfinished", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("refused\tx"), logs: 10}, NotRun},
		{"not enforced", Attack{Observe: ObserveReason, Arg: "limit-exceeded", Needs: NeedsDiskQuota}, seen{canary: []byte("n"), rec: record{Isolation: "bwrap+rlimits+disk-unenforced"}}, NotEnforced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ev := r.decide(tc.a, "n", tc.s); got != tc.want {
				t.Errorf("seen %s (%s), want %s", got, ev, tc.want)
			}
		})
	}
}

// TestReport_SummaryAndDigest: the summary line's shape, and a digest that changes with any
// row's outcome.
func TestReport_SummaryAndDigest(t *testing.T) {
	rep := &Report{Target: "local", Rows: []Row{
		{ID: "a", Expected: Blocked, Seen: Blocked, Pass: true},
		{ID: "b", Expected: Allowed, Seen: Allowed, Pass: true},
	}}
	rep.finish(0)
	if got := rep.Summary(); got != "selftest local: 1/1 blocked, 1/1 allowed, 0 s" || !rep.OK() {
		t.Errorf("Summary = %q, OK %v", got, rep.OK())
	}
	d := rep.Digest
	rep.Rows[0].Seen, rep.Rows[0].Pass = Allowed, false
	rep.finish(0)
	if rep.Digest == d || rep.OK() || !strings.HasPrefix(rep.Digest, "sha256:") {
		t.Errorf("digest %s after a row changed (was %s), OK %v", rep.Digest, d, rep.OK())
	}
}
