package k8stest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// killsSubmit is a round's first driver, on the leader's volume (round $R, out/$R): in the
// first round the shell capability; each round its own subagents (k$R-a quick, k$R-b/c/d
// sleeping $SB, $SC, $SD seconds, so the round's plan carries its own sleeps and its
// dispatches are told apart by subagent), a plan with no retry: (a, then b, c and d on a, up
// to three in flight as Jobs), submitted to the leading serve; then the run's status every
// half second into out/$R/status.json until the test kills the leader.
const killsSubmit = `set -eu
o=/var/lib/agora/out/$R
mkdir -p /tmp/shell "$o"
if [ "$FIRST" = 1 ]; then
  printf 'commands: ["sh -c *"]\n' > /tmp/shell/capability.yaml
  agora capability register shell --from /tmp/shell
fi
agora subagent register "$R-a" --runtime exec --command "sh -c 'echo done'" --capability shell
for x in b:$SB c:$SC d:$SD; do
  agora subagent register "$R-${x%%:*}" --runtime exec --command "sh -c 'echo working; sleep ${x#*:}; echo done'" --capability shell
done
cat > /tmp/plan.yaml <<EOF
version: 1
name: leader-kills-$R
defaults: {target: k8s, timeout: 5m}
tasks:
  - {id: a, subagent: $R-a}
  - {id: b, subagent: $R-b, depends_on: [a]}
  - {id: c, subagent: $R-c, depends_on: [a]}
  - {id: d, subagent: $R-d, depends_on: [a]}
EOF
agora orch submit /tmp/plan.yaml > "$o/run.new"
mv "$o/run.new" "$o/run"
while :; do
  agora orch status "$(cat "$o/run")" -o json > "$o/status.new" 2>/dev/null && mv "$o/status.new" "$o/status.json"
  sleep 0.5
done
`

// killsFinish is a round's second driver, on the new leader's volume: it waits for run $RUN
// to end (a run the restored home does not know: 30 failed looks, then it gives up, saying
// so), then writes the run's status, every dispatch, the audit's dispatch.adopted entries and
// the run's audit bundle into out/$R.
const killsFinish = `set -u
o=/var/lib/agora/out/$R
mkdir -p "$o"
fails=0
while :; do
  if agora orch status "$RUN" -o json > "$o/final.new" 2> "$o/final.err"; then
    mv "$o/final.new" "$o/final.json"
    grep -Eq '^  "state": "(succeeded|failed|cancelled)"' "$o/final.json" && break
  else
    fails=$((fails+1))
    if [ "$fails" -ge 30 ]; then echo "agora orch status $RUN failed $fails times:"; cat "$o/final.err"; break; fi
  fi
  sleep 0.5
done
agora dispatch list --limit 10000 -o json > "$o/dispatches.json" 2> "$o/dispatches.err"
agora audit log --kind dispatch.adopted -o json > "$o/adopted.json" 2> "$o/adopted.err"
agora orch audit "$RUN" --out "$o/bundle.json" 2> "$o/bundle.err"
echo finished
`

// killsStatus is what a round reads of `agora orch status -o json`.
type killsStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Tasks []struct {
		ID         string   `json:"id"`
		State      string   `json:"state"`
		Attempts   int      `json:"attempts"`
		DispatchID string   `json:"dispatch_id"`
		Dispatches []string `json:"dispatches"`
		Reason     string   `json:"reason"`
		Detail     string   `json:"detail"`
	} `json:"tasks"`
}

// killsDispatch is what a round reads of `agora dispatch list -o json`.
type killsDispatch struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	Reason    string     `json:"reason"`
	Detail    string     `json:"detail"`
	Subagent  string     `json:"subagent"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
}

// killsAdopted is a dispatch.adopted entry of `agora audit log -o json`.
type killsAdopted struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

// killsPods records every pod of a dispatch in namespace agents: when the test first saw it
// and the most restarts its containers were seen with, by dispatch id and pod uid.
type killsPods struct {
	mu   sync.Mutex
	pods map[string]map[string]*killsPod
}

type killsPod struct {
	first    time.Time
	restarts int
	ended    string // once the pod ended: its containers' states and logs, the evidence of a failed task
}

// watchKillsPods polls namespace agents every 200 ms until ctx ends.
func watchKillsPods(ctx context.Context, c *k8stest.Cluster) *killsPods {
	d := &killsPods{pods: map[string]map[string]*killsPod{}}
	go func() {
		for ctx.Err() == nil {
			type cstatus struct {
				Name         string
				RestartCount int
				State        json.RawMessage
			}
			var list struct {
				Items []struct {
					Metadata struct {
						Name   string
						UID    string
						Labels map[string]string
					}
					Status struct {
						Phase                                    string
						InitContainerStatuses, ContainerStatuses []cstatus
					}
				}
			}
			now := time.Now()
			if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agents/pods?labelSelector=agora.dispatch", nil, &list); err == nil {
				d.mu.Lock()
				for _, p := range list.Items {
					id := p.Metadata.Labels["agora.dispatch"]
					if d.pods[id] == nil {
						d.pods[id] = map[string]*killsPod{}
					}
					kp := d.pods[id][p.Metadata.UID]
					if kp == nil {
						kp = &killsPod{first: now}
						d.pods[id][p.Metadata.UID] = kp
					}
					for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
						kp.restarts = max(kp.restarts, cs.RestartCount)
					}
					if kp.ended == "" && (p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed") {
						var b strings.Builder
						fmt.Fprintf(&b, "pod %s %s, seen first %s:\n", p.Metadata.Name, p.Status.Phase, kp.first.Format(time.RFC3339Nano))
						for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
							fmt.Fprintf(&b, "  container %s: %s\n", cs.Name, cs.State)
							var log []byte
							_ = c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agents/pods/"+p.Metadata.Name+"/log?timestamps=true&container="+cs.Name, nil, &log)
							fmt.Fprintf(&b, "  its log:\n%s\n", tail(string(log), 6000))
						}
						kp.ended = b.String()
					}
				}
				d.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return d
}

// of is dispatch id's pods: their count, the earliest time one was seen, the most restarts.
func (d *killsPods) of(id string) (n int, first time.Time, restarts int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pods[id] {
		n++
		if first.IsZero() || p.first.Before(first) {
			first = p.first
		}
		restarts = max(restarts, p.restarts)
	}
	return
}

// endedLog is what the watcher kept of dispatch id's ended pods.
func (d *killsPods) endedLog(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, p := range d.pods[id] {
		if p.ended == "" {
			fmt.Fprintf(&b, "a pod seen first %s, not seen ended\n", p.first.Format(time.RFC3339Nano))
		}
		b.WriteString(p.ended)
	}
	return b.String()
}

// killsRound is one round's record, for the summary.
type killsRound struct {
	n                   int
	sleeps              [3]int
	delay               time.Duration
	old, next           string
	runningAtKill       []string // tasks running in the leader's last status before the kill
	inFlight            []string // tasks whose dispatch had a Job or a start before the kill and ended after it
	adopted             []string // tasks whose dispatch carries a dispatch.adopted entry (*: at_start)
	toLease, toServe    time.Duration
	result              string
	elapsed             time.Duration
	ranOnceViolations   int
	adoptionViolations  int
	runSucceeded        bool
	unknownRunOnRestore bool
}

// TestRealNodeLeaderKills: the leader killed at any moment of a run loses nothing, N times
// in one HA world (deploy/kubernetes/ha on the real kubelet, as TestRealNodeLeaderKill).
// Each round submits, on the current leader, a plan with no retry: (a quick; b, c and d on a,
// each sleeping 1-6 s, drawn per round), kills the leader's serve with SIGKILL and
// force-deletes its pod at a random moment from just after the submit to about the run's
// end, waits for the other replica (or the StatefulSet's new pod) to take over, waits for the
// run to end on it, and checks: the run succeeded; every task succeeded with one attempt and
// one dispatch, its worker in one pod that never restarted, and once in the run's audit
// bundle, which verifies; every dispatch that was in flight at the kill (its Job's pod seen,
// or its start recorded, before the kill) and ended after it carries one dispatch.adopted
// entry (at_start: adopted by the Start of its new supervisor, which found its Job; else by
// serve). Then the killed replica comes back as the standby, and the next round runs on the
// new leader. A failed round is reported with its evidence (both serves' logs, the status,
// the dispatches, the adoptions) and the rounds go on; the summary table ends the log.
//
// AGORA_LEADER_KILLS=N sets the number of kills (with AGORA_K8S_REAL_NODE=1; see the
// Makefile's test-k8s); AGORA_LEADER_KILLS_SEED replays a seed the log names.
func TestRealNodeLeaderKills(t *testing.T) {
	env := os.Getenv("AGORA_LEADER_KILLS")
	if env == "" {
		t.Skip("SKIP: set AGORA_LEADER_KILLS=N (e.g. 20) and AGORA_K8S_REAL_NODE=1 to kill the HA leader N times: " +
			"AGORA_K8S_REAL_NODE=1 AGORA_LEADER_KILLS=20 CGO_ENABLED=1 go test -count=1 -timeout 60m -run '^TestRealNodeLeaderKills$' -v ./internal/k8stest")
	}
	kills, err := strconv.Atoi(env)
	if err != nil || kills < 1 {
		t.Fatalf("AGORA_LEADER_KILLS=%q: want a number of kills, at least 1", env)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AGORA_LEADER_KILLS_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("AGORA_LEADER_KILLS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("%d kills, seed %d (AGORA_LEADER_KILLS_SEED=%d replays the sleeps and delays)", kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	c := k8stest.Start(t, k8stest.Options{RealNode: true, InClusterAPI: true})
	begin := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute+time.Duration(kills)*150*time.Second)
	defer cancel()
	w := startLeaderWorld(ctx, t, c)
	leader := w.waitLeading(ctx, time.Time{})
	t.Logf("%s leads, the world up in %s", leader.name, time.Since(begin).Round(time.Second))
	pods := watchKillsPods(ctx, c)

	var rounds []*killsRound
	defer func() { logKillsSummary(t, rounds, seed, time.Since(begin)) }()
	for n := 1; n <= kills; n++ {
		rctx, rcancel := context.WithTimeout(ctx, 4*time.Minute)
		r := &killsRound{n: n, old: leader.name}
		rounds = append(rounds, r)
		leader = w.killRound(rctx, r, leader, rng, pods)
		rcancel()
	}
	failed := 0
	for _, r := range rounds {
		if r.result != "ok" {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d rounds failed", failed, len(rounds))
	}
}

// killRound runs round r on leader and returns the next leader, once the other replica waits
// as its standby.
func (w *leaderWorld) killRound(ctx context.Context, r *killsRound, leader podInfo, rng *rand.Rand, pods *killsPods) podInfo {
	t, c := w.t, w.c
	t.Helper()
	start := time.Now()
	name := fmt.Sprintf("k%d", r.n)
	for i := range r.sleeps {
		r.sleeps[i] = 1 + rng.IntN(6)
	}
	// From just after the submit to about the run's end: a's pod and the longest sleep's.
	longest := slices.Max(r.sleeps[:])
	r.delay = time.Duration(rng.Int64N(int64(time.Duration(longest)*time.Second + 7*time.Second)))
	r.delay = r.delay.Truncate(10 * time.Millisecond)
	t.Logf("round %d: on %s, sleeps b=%ds c=%ds d=%ds, the kill %s after the submit", r.n, leader.name, r.sleeps[0], r.sleeps[1], r.sleeps[2], r.delay)

	first := "0"
	if r.n == 1 {
		first = "1"
	}
	senv := append([]any{
		map[string]string{"name": "R", "value": name}, map[string]string{"name": "FIRST", "value": first},
		map[string]string{"name": "SB", "value": strconv.Itoa(r.sleeps[0])}, map[string]string{"name": "SC", "value": strconv.Itoa(r.sleeps[1])},
		map[string]string{"name": "SD", "value": strconv.Itoa(r.sleeps[2])},
	}, w.s3Env...)
	submitJob := "agora-submit-" + name
	if err := c.Apply(ctx, shellJob(submitJob, w.im.agora, "home-"+leader.name, killsSubmit, senv, nil)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(w.pvs[leader.name], "out", name)
	var run string
	for run == "" {
		if b, err := os.ReadFile(filepath.Join(out, "run")); err == nil && strings.TrimSpace(string(b)) != "" {
			run = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("round %d: the run was never submitted: %v\ndriver:\n%s\nserve:\n%s", r.n, ctx.Err(), jobLog(c, submitJob), podLog(context.Background(), c, "agora", leader.name, "agora"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	submitted := time.Now()
	time.Sleep(time.Until(submitted.Add(r.delay)))
	var last killsStatus
	if b, err := os.ReadFile(filepath.Join(out, "status.json")); err == nil {
		_ = json.Unmarshal(b, &last)
	}
	for _, x := range last.Tasks {
		if x.State == "running" {
			r.runningAtKill = append(r.runningAtKill, x.ID)
		}
	}
	oldLog := podLog(ctx, c, "agora", leader.name, "agora") // the pod and its log go with the kill
	killed := w.kill(ctx, leader)
	t.Logf("round %d: run %s, killed %s at %s, %s after the submit (%s after it was planned); its last status: run %s, running %v",
		r.n, run, leader.name, killed.UTC().Format(time.RFC3339Nano), killed.Sub(submitted).Round(time.Millisecond),
		killed.Sub(submitted.Add(r.delay)).Round(time.Millisecond), last.State, r.runningAtKill)
	_ = c.Do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/agora/jobs/"+submitJob+"?propagationPolicy=Background", nil, nil)

	next := w.waitLeading(ctx, killed)
	acquired, serving := w.takeoverTimes(ctx, next)
	r.next, r.toLease, r.toServe = next.name, acquired.Sub(killed), serving.Sub(killed)
	t.Logf("round %d: %s holds the Lease %s after the SIGKILL, serves %s after it", r.n, next.name, r.toLease.Round(time.Millisecond), r.toServe.Round(time.Millisecond))

	finishJob := "agora-finish-" + name
	fenv := append([]any{map[string]string{"name": "R", "value": name}, map[string]string{"name": "RUN", "value": run}}, w.s3Env...)
	if err := c.Apply(ctx, shellJob(finishJob, w.im.agora, "home-"+next.name, killsFinish, fenv, nil)); err != nil {
		t.Fatal(err)
	}
	nout := filepath.Join(w.pvs[next.name], "out", name)
	evidence := func() {
		t.Logf("round %d evidence: the old leader %s's serve (captured just before the kill):\n%s", r.n, leader.name, tail(oldLog, 20000))
		for _, p := range []string{"agora-0", "agora-1"} {
			t.Logf("round %d evidence: %s's serve now:\n%s", r.n, p, tail(podLog(context.Background(), c, "agora", p, "agora"), 20000))
		}
		t.Logf("round %d evidence: the finishing driver:\n%s", r.n, jobLog(c, finishJob))
		for _, f := range []string{"status.json", "final.json", "final.err", "dispatches.err", "adopted.json", "adopted.err"} {
			dir := nout
			if f == "status.json" {
				dir = out
			}
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				t.Logf("round %d evidence: %s:\n%s", r.n, f, tail(string(b), 20000))
			}
		}
		if b, err := os.ReadFile(filepath.Join(nout, "dispatches.json")); err == nil {
			var ds []json.RawMessage
			_ = json.Unmarshal(b, &ds)
			for _, d := range ds {
				var x killsDispatch
				if json.Unmarshal(d, &x) == nil && strings.HasPrefix(x.Subagent, name+"-") {
					t.Logf("round %d evidence: dispatch:\n%s", r.n, d)
				}
			}
		}
	}
	if !w.waitKillsDriver(ctx, finishJob) {
		r.result = "driver failed"
		t.Errorf("round %d: the finishing driver failed or never ended", r.n)
		evidence()
		t.FailNow()
	}
	w.checkRound(t, r, run, nout, killed, acquired, pods)
	if r.result != "ok" {
		evidence()
	}
	_ = c.Do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/agora/jobs/"+finishJob+"?propagationPolicy=Background", nil, nil)
	w.waitStandby(ctx, otherReplica(next.name), next.name)
	r.elapsed = time.Since(start)
	t.Logf("round %d: %s in %s", r.n, r.result, r.elapsed.Round(time.Second))
	return next
}

// waitKillsDriver waits for Job name's pod to succeed; false when it failed or ctx ended.
func (w *leaderWorld) waitKillsDriver(ctx context.Context, name string) bool {
	for {
		for _, p := range podsOf(ctx, w.t, w.c, "agora", "job-name%3D"+name) {
			switch p.phase {
			case "Succeeded":
				return true
			case "Failed":
				return false
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkRound checks what round r's finishing driver left in out (see TestRealNodeLeaderKills)
// and sets r.result.
func (w *leaderWorld) checkRound(t *testing.T, r *killsRound, run, out string, killed, acquired time.Time, pods *killsPods) {
	t.Helper()
	var problems []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		problems = append(problems, msg)
		t.Errorf("round %d: %s", r.n, msg)
	}
	defer func() {
		if len(problems) == 0 {
			r.result = "ok"
		} else if r.result == "" {
			r.result = "FAILED"
		}
	}()
	name := fmt.Sprintf("k%d", r.n)
	var st killsStatus
	b, err := os.ReadFile(filepath.Join(out, "final.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.ID != run {
		r.unknownRunOnRestore = true
		r.result = "run unknown"
		fail("the new leader has no status of run %s: %v", run, err)
		return
	}
	r.runSucceeded = st.State == "succeeded"
	if !r.runSucceeded {
		r.result = "run " + st.State
		fail("run %s ended %s on the new leader, want succeeded", run, st.State)
	}
	var ds []killsDispatch
	if b, err := os.ReadFile(filepath.Join(out, "dispatches.json")); err != nil || json.Unmarshal(b, &ds) != nil {
		fail("no dispatch list on the new leader: %v", err)
	}
	var ads []killsAdopted
	if b, err := os.ReadFile(filepath.Join(out, "adopted.json")); err != nil || json.Unmarshal(b, &ads) != nil {
		fail("no dispatch.adopted entries list on the new leader: %v", err)
	}
	adopted := map[string][]killsAdopted{}
	for _, a := range ads {
		id := strings.TrimPrefix(a.Subject, "dispatch/")
		adopted[id] = append(adopted[id], a)
	}
	bySub := map[string][]killsDispatch{}
	byID := map[string]killsDispatch{}
	for _, d := range ds {
		if strings.HasPrefix(d.Subagent, name+"-") {
			bySub[d.Subagent] = append(bySub[d.Subagent], d)
			byID[d.ID] = d
		}
	}
	succeeded := map[string]int{}
	if _, err := os.Stat(filepath.Join(out, "bundle.json")); err == nil {
		for _, e := range bundleEntries(t, filepath.Join(out, "bundle.json")) {
			if e.Kind == "orch.task.succeeded" {
				succeeded[e.task()]++
			}
		}
		if res := w.agora(t, "verify", filepath.Join(out, "bundle.json"), "--key", filepath.Join(w.keys, "audit.pub")); res != "" {
			fail("agora verify of the run's bundle failed:\n%s", res)
		}
	} else {
		fail("no audit bundle of run %s: %v", run, err)
	}
	tasks := map[string]bool{}
	for _, x := range st.Tasks {
		tasks[x.ID] = true
		d, known := byID[x.DispatchID]
		where := "not in flight at the kill"
		n, seen, restarts := pods.of(x.DispatchID)
		// In flight at the kill: its Job's pod seen, or its start recorded, before the kill,
		// and it ended after it.
		jobBefore := n > 0 && seen.Before(killed)
		startBefore := known && d.StartedAt != nil && d.StartedAt.Before(killed)
		endedAfter := known && (d.EndedAt == nil || d.EndedAt.After(killed))
		// An adoption says its Job was made before the kill, also when the watcher saw its
		// pod only after it.
		adoptedAny := len(adopted[x.DispatchID]) > 0
		inFlight := (jobBefore || startBefore || adoptedAny) && endedAfter
		if inFlight {
			where = fmt.Sprintf("in flight at the kill (pod seen before it: %v, start recorded before it: %v, adopted: %v)", jobBefore, startBefore, adoptedAny)
			r.inFlight = append(r.inFlight, x.ID)
		}
		for _, a := range adopted[x.DispatchID] {
			tag := x.ID
			if a.Details["at_start"] == true {
				tag += "*"
			}
			r.adopted = append(r.adopted, tag)
			t.Logf("round %d: task %s's dispatch %s adopted at %s: %v", r.n, x.ID, x.DispatchID, a.Time.Format(time.RFC3339Nano), a.Details)
		}
		desc := fmt.Sprintf("task %s (dispatch %s: %s/%s %q; %s; %d pods, %d restarts)", x.ID, x.DispatchID, d.State, d.Reason, d.Detail, where, n, restarts)
		if x.State != "succeeded" {
			fail("%s ended %s (%s: %s)", desc, x.State, x.Reason, x.Detail)
			if x.DispatchID != "" {
				t.Logf("round %d evidence: task %s's pods:\n%s", r.n, x.ID, pods.endedLog(x.DispatchID))
			}
		}
		if x.Attempts != 1 || len(x.Dispatches) > 1 {
			r.ranOnceViolations++
			fail("%s: %d attempts, dispatches %v, want one", desc, x.Attempts, x.Dispatches)
		}
		if got := len(bySub[name+"-"+x.ID]); got != 1 {
			r.ranOnceViolations++
			fail("%s: %d dispatches of subagent %s-%s, want one", desc, got, name, x.ID)
		}
		if n != 1 || restarts != 0 {
			r.ranOnceViolations++
			fail("%s: its worker ran in %d pods with %d restarts, want one pod, never restarted", desc, n, restarts)
		}
		if succeeded[x.ID] != 1 {
			r.ranOnceViolations++
			fail("%s: succeeded %d times in the run's audit, want once", desc, succeeded[x.ID])
		}
		// Every dispatch in flight at the kill that ended under the new leader was adopted,
		// once: by serve, or by its new supervisor's Start (at_start), which found its Job.
		endedUnderNew := known && d.EndedAt != nil && d.EndedAt.After(acquired)
		if inFlight && endedUnderNew && len(adopted[x.DispatchID]) != 1 {
			r.adoptionViolations++
			fail("%s ended under the new leader with %d dispatch.adopted entries, want one", desc, len(adopted[x.DispatchID]))
		}
		if len(adopted[x.DispatchID]) > 1 {
			r.adoptionViolations++
			fail("%s: %d dispatch.adopted entries, want at most one", desc, len(adopted[x.DispatchID]))
		}
		t.Logf("round %d: %s, %s after %d attempts", r.n, desc, x.State, x.Attempts)
	}
	for _, x := range []string{"a", "b", "c", "d"} {
		if !tasks[x] {
			fail("run %s has no task %s: %+v", run, x, st)
		}
	}
}

// logKillsSummary logs the rounds' table and the takeover times' min/median/max.
func logKillsSummary(t *testing.T, rounds []*killsRound, seed uint64, total time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "leader kills: %d rounds, seed %d, %s in all\n", len(rounds), seed, total.Round(time.Second))
	fmt.Fprintf(&b, "%-5s %-9s %-8s %-15s %-13s %-13s %-8s %-8s %-7s %s\n", "round", "sleeps", "delay", "kill", "running@kill", "in flight", "adopted", "lease s", "serve s", "result")
	var lease, serve []float64
	ok, inflight, adopted := 0, 0, 0
	for _, r := range rounds {
		fmt.Fprintf(&b, "%-5d %-9s %-8s %-15s %-13s %-13s %-8s %-8.1f %-7.1f %s (%s)\n", r.n,
			fmt.Sprintf("%d/%d/%d", r.sleeps[0], r.sleeps[1], r.sleeps[2]), r.delay.Round(10*time.Millisecond),
			r.old+">"+r.next, strings.Join(r.runningAtKill, ","), strings.Join(r.inFlight, ","), strings.Join(r.adopted, ","),
			r.toLease.Seconds(), r.toServe.Seconds(), r.result, r.elapsed.Round(time.Second))
		if r.next != "" {
			lease, serve = append(lease, r.toLease.Seconds()), append(serve, r.toServe.Seconds())
		}
		if r.result == "ok" {
			ok++
		}
		inflight += len(r.inFlight)
		adopted += len(r.adopted)
	}
	stats := func(xs []float64) string {
		if len(xs) == 0 {
			return "-"
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		return fmt.Sprintf("%.1f/%.1f/%.1f", s[0], s[len(s)/2], s[len(s)-1])
	}
	fmt.Fprintf(&b, "passed %d of %d; in flight at the kills %d, adopted %d (*: at_start); takeover min/median/max: to the Lease %s s, to serving %s s\n",
		ok, len(rounds), inflight, adopted, stats(lease), stats(serve))
	t.Log(b.String())
}
