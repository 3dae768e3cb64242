package selftest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
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
		{"probe quiet", Attack{Observe: ObserveListener}, ran("refused\tconnection refused"), Blocked},
		// A program that started (its canary) but left no report may never have made its
		// attack: a quiet probe or an absent output is then no evidence of a boundary.
		{"probe quiet, no report", Attack{Observe: ObserveListener}, ran(""), NotRun},
		{"drop quiet, no report", Attack{Observe: ObserveDropfile}, ran(""), NotRun},
		{"no process left, no report", Attack{Observe: ObserveProcess}, ran(""), NotRun},
		{"output absent, no report", Attack{Observe: ObserveOutput, Arg: "leak"}, ran(""), NotRun},
		{"output absent", Attack{Observe: ObserveOutput, Arg: "leak"}, ran("done	wrote it"), Blocked},
		{"reason", Attack{Observe: ObserveReason, Arg: "timeout"}, seen{canary: []byte("n"), rec: record{State: "failed", Reason: "timeout"}}, Blocked},
		{"other reason", Attack{Observe: ObserveReason, Arg: "timeout"}, seen{canary: []byte("n"), rec: record{State: "finished"}}, Allowed},
		{"patch names it", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n"), patch: []byte("diff --git a/.git/hooks/x b/.git/hooks/x\n")}, Allowed},
		{"patch lacks it", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n"), patch: []byte("diff --git a/m b/m\n")}, Blocked},
		{"empty patch", Attack{Observe: ObservePatch, Arg: ".git/"}, seen{canary: []byte("n")}, NotRun},
		{"logs capped", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\twrote 16 MiB"), logSize: 4 << 20}, Blocked},
		{"logs kept whole", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\twrote 16 MiB"), logSize: 16 << 20}, Allowed},
		{"logs unread", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("done\tx"), logSize: -1}, NotRun},
		{"flood unfinished", Attack{Observe: ObserveLogs, Arg: "5MiB"}, seen{canary: []byte("n"), report: []byte("refused\tx"), logSize: 10}, NotRun},
		{"not enforced", Attack{Observe: ObserveReason, Arg: "limit-exceeded", Needs: NeedsDiskQuota}, seen{canary: []byte("n"), rec: record{Isolation: "bwrap+rlimits+disk-unenforced"}}, NotEnforced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ev := r.decide(tc.a, "n", tc.s); got != tc.want {
				t.Errorf("seen %s (%s), want %s", got, ev, tc.want)
			}
		})
	}
}

// TestDecide_SecretBeyondTheReport: a program that read the host's secret is allowed however
// its report reads: refused, or clipped before the secret, with the secret in its log or an
// output.
func TestDecide_SecretBeyondTheReport(t *testing.T) {
	r := &run{secret: "s3cret"}
	a := Attack{Observe: ObserveSecret}
	outputs := t.TempDir()
	if err := os.WriteFile(filepath.Join(outputs, "loot"), []byte("x s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]seen{
		"in the log":   {canary: []byte("n"), report: []byte("refused\tno"), logs: []byte("found s3cret\n")},
		"in an output": {canary: []byte("n"), report: []byte("refused\tno"), outputs: outputs},
		"in the patch": {canary: []byte("n"), report: []byte("done\t" + strings.Repeat("x", 400)), patch: []byte("+s3cret\n")},
	} {
		if got, ev := r.decide(a, "n", s); got != Allowed {
			t.Errorf("secret %s: seen %s (%s), want %s", name, got, ev, Allowed)
		}
	}
}

// TestDecide_EntriesWithoutCanary: an audit flood the audit budget ends limit-exceeded keeps
// no canary; an entry with the run's mark shows the program ran and its count decides, and
// without one the row stays not run.
func TestDecide_EntriesWithoutCanary(t *testing.T) {
	r := &run{}
	a := Attack{Observe: ObserveEntries, Arg: "600"}
	rec := record{ID: "d1", State: "failed", Reason: "limit-exceeded"}
	marked := seen{rec: rec, host: hostSeen{entries: []logEntry{{Kind: "dispatch.started"}, {Kind: "tool.call", Details: map[string]any{"call_id": mark("n") + "-7"}}}}}
	if got, ev := r.decide(a, "n", marked); got != Blocked {
		t.Errorf("marked entries, no canary: seen %s (%s), want %s", got, ev, Blocked)
	}
	unmarked := seen{rec: rec, host: hostSeen{entries: []logEntry{{Kind: "dispatch.started"}, {Kind: "tool.call", Details: map[string]any{"call_id": "f7"}}}}}
	if got, ev := r.decide(a, "n", unmarked); got != NotRun {
		t.Errorf("unmarked entries, no canary: seen %s (%s), want %s", got, ev, NotRun)
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

// TestDecide_DiskQuotaFromTheRecord: a disk-quota attack is enforced only when the record's
// isolation names the quota; a pod's record says disk-unenforced (its workspace is an
// emptyDir, on no quota), so the row is not enforced there, with the fix for pods.
func TestDecide_DiskQuotaFromTheRecord(t *testing.T) {
	a := Attack{Expect: Blocked, Observe: ObserveReason, Arg: "limit-exceeded", Needs: NeedsDiskQuota}
	filled := func(isolation string) seen {
		return seen{canary: []byte("n"), rec: record{State: "failed", Reason: "limit-exceeded", Isolation: isolation}}
	}
	for _, tc := range []struct {
		provider, isolation, want, fix string
	}{
		{"local", "bwrap+rlimits+runas+disk-quota", Blocked, ""},
		{"local", "bwrap+rlimits+disk-unenforced", NotEnforced, diskFix},
		{"kubernetes", "kubernetes+restricted+readonly+nonroot+netpol+disk-unenforced", NotEnforced, podDiskFix},
	} {
		r := &run{o: Options{Provider: tc.provider}}
		got, ev := r.decide(a, "n", filled(tc.isolation))
		if got != tc.want {
			t.Errorf("%s, isolation %s: seen %s (%s), want %s", tc.provider, tc.isolation, got, ev, tc.want)
		}
		if tc.fix != "" && r.fix() != tc.fix {
			t.Errorf("%s: fix %q, want %q", tc.provider, r.fix(), tc.fix)
		}
	}
}

// TestReport_ClassTimes: each class's rows counted and their seconds summed, most first.
func TestReport_ClassTimes(t *testing.T) {
	rep := &Report{Rows: []Row{
		{ID: "a", Class: "network", Seconds: 1.5},
		{ID: "b", Class: "host-read", Seconds: 4},
		{ID: "c", Class: "network", Seconds: 2.25},
		{ID: "d", Class: "audit", Seconds: 0.5},
	}}
	rep.finish(0)
	want := []ClassTime{{"host-read", 1, 4}, {"network", 2, 3.75}, {"audit", 1, 0.5}}
	if !slices.Equal(rep.Classes, want) {
		t.Errorf("Classes = %v, want %v", rep.Classes, want)
	}
}

// TestKillMarked_TakesTheGroup: a marked shell that leads its own group is killed with the
// child it forked, which carries no mark.
func TestKillMarked_TakesTheGroup(t *testing.T) {
	mark := "agora-selftest-test" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("sh", "-c", "sleep 60; :", mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Skip("SKIP: cannot start sh for the marked process:", err)
	}
	defer cmd.Wait()
	var child int
	agoratest.Poll(10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			child, _ = strconv.Atoi(strings.Fields(string(b))[0])
		}
		// Until it execs sleep, a forked child still carries the shell's command line, mark
		// included, and killMarked rightly finds it marked: wait for the exec.
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		return child != 0 && strings.HasPrefix(string(cl), "sleep\x00")
	})
	if child == 0 {
		t.Fatal("the marked shell forked no child")
	}
	if pids := killMarked(mark); len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("killMarked = %v, want [%d]", pids, cmd.Process.Pid)
	}
	if agoratest.Poll(10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		return err != nil || strings.Contains(string(b), ") Z ")
	}) {
		return
	}
	syscall.Kill(child, syscall.SIGKILL)
	t.Errorf("the marked shell's child %d outlived it", child)
}

// TestProbeAfter_DropReplaced: a drop directory replaced by a symlink is a breach, and the
// runner removes nothing in the directory it points to.
func TestProbeAfter_DropReplaced(t *testing.T) {
	probe, victim := t.TempDir(), t.TempDir()
	keep := filepath.Join(victim, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(probe, "drop")); err != nil {
		t.Fatal(err)
	}
	r := &run{probe: probe}
	if got := r.probeAfter(Attack{Observe: ObserveDropfile}, "n"); got == "" {
		t.Error("a replaced drop directory: the probe saw nothing")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the runner removed a file through the replaced drop directory: %v", err)
	}
}

// TestStartedLate_OnlyATimeoutBeforeTheCanaryRunsAgain: an attack with a time limit whose
// sandbox or pod timed out before the program wrote its canary runs once more with a longer
// start allowance (a pod's first run has one already, a sandbox's none); one that wrote its
// canary, ended otherwise, or has no time limit is decided on its one run.
func TestStartedLate_OnlyATimeoutBeforeTheCanaryRunsAgain(t *testing.T) {
	timed := Attack{Timeout: 10 * time.Second, Observe: ObserveReason, Arg: "timeout"}
	timedOut := record{ID: "d1", State: "failed", Reason: "timeout"}
	for name, c := range map[string]struct {
		a    Attack
		s    seen
		want bool
	}{
		"timed out, no canary":        {timed, seen{rec: timedOut}, true},
		"timed out, another's canary": {timed, seen{rec: timedOut, canary: []byte("other\n")}, true},
		"timed out after the canary":  {timed, seen{rec: timedOut, canary: []byte("n\n")}, false},
		"failed otherwise, no canary": {timed, seen{rec: record{ID: "d1", State: "failed", Reason: "start-failed"}}, false},
		"no time limit, timed out":    {Attack{Observe: ObserveReason, Arg: "timeout"}, seen{rec: timedOut}, false},
		"finished with its canary":    {timed, seen{rec: record{ID: "d1", State: "finished"}, canary: []byte("n")}, false},
	} {
		if got := startedLate(c.a, "n", c.s); got != c.want {
			t.Errorf("%s: startedLate = %v, want %v", name, got, c.want)
		}
	}
	pod := &run{o: Options{Provider: "kubernetes"}}
	if got := pod.startAllowances(timed); len(got) != 2 || got[0] >= got[1] {
		t.Errorf("kubernetes, timed: allowances %v, want two, growing", got)
	}
	if got := pod.startAllowances(Attack{}); len(got) != 1 || got[0] != 0 {
		t.Errorf("kubernetes, no time limit: allowances %v, want [0]", got)
	}
	for _, p := range []string{"", "local", "docker"} {
		r := &run{o: Options{Provider: p}}
		// The first run adds nothing to the attack's own limit: a busy loop spins no longer
		// than the row says on any quiet host.
		if got := r.startAllowances(timed); len(got) != 2 || got[0] != 0 || got[1] <= 0 {
			t.Errorf("provider %q, timed: allowances %v, want [0, more]", p, got)
		}
		if got := r.startAllowances(Attack{}); len(got) != 1 || got[0] != 0 {
			t.Errorf("provider %q, no time limit: allowances %v, want [0]", p, got)
		}
	}
}
