package k8stest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// leaderSubmit is the first driver, on the leader's volume: the catalog (a shell capability, a
// quick and a slow exec subagent), a plan of four tasks in a chain on the manifests' kubernetes
// target (c, the slow one, is where the leader is killed), submitted to the leading serve; then
// the run's status, every second, into out/status.json on the volume, which the test reads.
const leaderSubmit = `set -eu
o=/var/lib/agora/out
mkdir -p /tmp/shell "$o"
printf 'commands: ["sh -c *"]\n' > /tmp/shell/capability.yaml
agora capability register shell --from /tmp/shell
agora subagent register quick --runtime exec --command "sh -c 'echo done'" --capability shell
agora subagent register slow --runtime exec --command "sh -c 'echo working; sleep 25'" --capability shell
cat > /tmp/plan.yaml <<'EOF'
version: 1
name: leader-kill
defaults: {target: k8s, timeout: 5m, retry: {max_attempts: 3, initial_backoff: 1s}}
tasks:
  - {id: a, subagent: quick}
  - {id: b, subagent: quick, depends_on: [a]}
  - {id: c, subagent: slow, depends_on: [b]}
  - {id: d, subagent: quick, depends_on: [c]}
EOF
agora orch submit /tmp/plan.yaml > "$o/run.new"
mv "$o/run.new" "$o/run"
while :; do
  agora orch status "$(cat "$o/run")" -o json > "$o/status.submit.new" && mv "$o/status.submit.new" "$o/status.json"
  sleep 1
done
`

// leaderFinish is the second driver, on the new leader's volume: it waits for run $RUN to end
// (out/status.json as above), then exports the run's audit bundle and the leader.acquired
// entries of the restored audit log.
const leaderFinish = `set -eu
o=/var/lib/agora/out
mkdir -p "$o"
while :; do
  agora orch status "$RUN" -o json > "$o/status.finish.new" && mv "$o/status.finish.new" "$o/status.json"
  grep -Eq '^  "state": "(succeeded|failed|cancelled)"' "$o/status.json" && break
  sleep 1
done
agora audit log --kind leader.acquired -o json > "$o/leader.json"
agora dispatch list -o json > "$o/dispatches.json" || true
agora orch audit "$RUN" --out "$o/bundle.json"
`

// TestRealNodeLeaderKill: deploy/kubernetes/ha's StatefulSet of two serves on a Lease,
// applied as written with namespaces.yaml and rbac.yaml (substituted: the three images, the
// bucket's endpoint and name, the endpoint's address in egress.allow_private; the two Secrets
// the file says to make: the keys and gateway CA of an `agora init --gateway-ca` on this host, versitygw's credentials), on
// the real control plane and kubelet, versitygw listening on the node IP. A plan of four tasks
// in a chain runs on the leader; while c (slow) runs, and once both databases were replicated
// after it started, the leader's serve is killed with SIGKILL (through containerd, as a crash
// or the OOM killer would) and its pod deleted with gracePeriodSeconds=0 (the kubelet sends
// SIGTERM first even then, and a serve that gets SIGTERM hands the Lease back, a graceful
// hand-off rather than a death: hence the SIGKILL before the delete). A replica takes the
// Lease after the kill (the standby, or the StatefulSet's new pod of the killed leader: both
// wait the dead record out, about one duration, and either may win), restores the home from
// the bucket and finishes the run: every task runs once, c (in flight at the kill) too, adopted
// by the new leader in one pod; each succeeds once in the run's audit, and the exported bundle verifies under the
// operator's audit.pub; the other replica waits as a standby. (c runs once. Its
// Job reached the old leader at agora-gateway-vip, whose one endpoint is the Ready replica, the
// leader; its gateway session was in agora.db, replicated; the new leader takes it back and
// adopts c's dispatch, and the Job's upload reaches it at the same address.) Then the fence: the new leader
// is frozen until the other takes over, and thawed it stops without another upload
// (fenceAfterThaw). Attacks: the standby's gateway port refuses (before the kill), and no
// serve's log holds the bucket's credentials. It logs both takeover times. About 2-3 minutes
// (two takeovers of ~10 s, the slow task's sleep of 25 s, pods starting): the one test of the
// ha manifests as written, and the acceptance test of two replicas on a Lease; it skips without a real node.
func TestRealNodeLeaderKill(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{RealNode: true, InClusterAPI: true})
	ctx, cancel := context.WithTimeout(t.Context(), 14*time.Minute)
	defer cancel()
	w := startLeaderWorld(ctx, t, c)
	leader := w.waitLeading(ctx, time.Time{})
	t.Logf("%s leads", leader.name)
	w.checkStandbyClosed(ctx, leader.name)

	pods := watchDispatchPods(ctx, c)
	if err := c.Apply(ctx, shellJob("agora-submit", w.im.agora, "home-"+leader.name, leaderSubmit, w.s3Env, nil)); err != nil {
		t.Fatal(err)
	}
	pv := w.pvs[leader.name]
	run := w.waitRunning(ctx, pv, leader)
	oldLog := podLog(ctx, c, "agora", leader.name, "agora") // the pod and its log go with the kill
	killed := w.kill(ctx, leader)
	t.Logf("killed %s's serve (SIGKILL) and deleted the pod (gracePeriodSeconds=0) while task c ran", leader.name)
	_ = c.Do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/agora/jobs/agora-submit?propagationPolicy=Background", nil, nil)

	next := w.waitLeading(ctx, killed)
	acquired, serving := w.takeoverTimes(ctx, next)
	t.Logf("takeover: %s holds the Lease %s after the SIGKILL, serves the restored home %s after it (lease duration 10s)",
		next.name, acquired.Sub(killed).Round(time.Millisecond), serving.Sub(killed).Round(time.Millisecond))

	env := append([]any{map[string]string{"name": "RUN", "value": run}}, w.s3Env...)
	if err := c.Apply(ctx, shellJob("agora-finish", w.im.agora, "home-"+next.name, leaderFinish, env, nil)); err != nil {
		t.Fatal(err)
	}
	waitDriver(ctx, t, c, "agora-finish", next)
	w.checkFinished(t, w.pvs[next.name], leader.name, next.name, pods)
	standby := otherReplica(next.name)
	w.waitStandby(ctx, standby, next.name)
	// Attack: the bucket's credentials never reach a serve's log, whatever replication said.
	logs := map[string]string{"the old leader": oldLog, "the new leader": podLog(ctx, c, "agora", next.name, "agora"),
		"the standby": podLog(ctx, c, "agora", standby, "agora")}
	for who, log := range logs {
		if who != "the standby" && !strings.Contains(log, "replicat") {
			t.Errorf("%s's serve says nothing of its replication:\n%s", who, log)
		}
		if strings.Contains(log, w.s3.AccessKeyID) || strings.Contains(log, w.s3.SecretAccessKey) {
			t.Errorf("%s's serve logged a credential of the bucket", who)
		}
	}
	// Never two leaders: the new leader frozen past the lease, then thawed after the next
	// takeover, stops without another upload.
	w.fenceAfterThaw(ctx, next)
}

// checkFinished reads what the finishing driver left on the new leader's volume: the run ended
// succeeded with every task run once, c (in flight at the kill) too: one attempt, adopted by
// the new leader (one dispatch.adopted in the run's audit), its worker run in one pod that
// never restarted (pods, watched all along); every task succeeded once in the run's audit
// bundle, which verifies; and the restored log's leader.acquired names the new leader,
// restored, after the old one.
func (w *leaderWorld) checkFinished(t *testing.T, pv, old, next string, pods *dispatchPods) {
	t.Helper()
	out := filepath.Join(pv, "out")
	r := readStatus(t, filepath.Join(out, "status.json"))
	if r.State != "succeeded" {
		t.Fatalf("the run did not succeed on the new leader: %+v", r)
	}
	for _, x := range []string{"a", "b", "c", "d"} {
		if _, n := r.task(x); n != 1 {
			t.Errorf("task %s ran %d attempts, want 1 (c, in flight at the kill, adopted by the new leader): %+v", x, n, r)
			b, _ := os.ReadFile(filepath.Join(out, "dispatches.json"))
			t.Logf("the dispatches on the new leader:\n%s", b)
		}
	}
	t.Logf("the run after the takeover: %+v", r)
	// c's worker ran once: one pod of its dispatch ever, its container never restarted.
	for _, x := range r.Tasks {
		if x.ID != "c" {
			continue
		}
		seen := pods.of(x.DispatchID)
		t.Logf("task c's dispatch %s: pods %v (uid: restarts)", x.DispatchID, seen)
		if len(seen) != 1 {
			t.Errorf("task c's dispatch %s ran in %d pods, want one: %v", x.DispatchID, len(seen), seen)
		}
		for uid, restarts := range seen {
			if restarts != 0 {
				t.Errorf("task c's pod %s restarted its worker %d times", uid, restarts)
			}
		}
	}
	if n := dispatchEntries(t, filepath.Join(out, "bundle.json"), "dispatch.adopted"); n != 1 {
		t.Errorf("%d dispatch.adopted entries in the run's audit, want 1 (c's, by the new leader)", n)
	}

	bundle := filepath.Join(out, "bundle.json")
	if res := w.agora(t, "verify", bundle, "--key", filepath.Join(w.keys, "audit.pub")); res != "" {
		t.Errorf("agora verify of the run's bundle failed:\n%s", res)
	}
	succeeded := map[string]int{}
	for _, e := range bundleEntries(t, bundle) {
		if e.Kind == "orch.task.succeeded" {
			succeeded[e.task()]++
		}
	}
	for _, x := range []string{"a", "b", "c", "d"} {
		if succeeded[x] != 1 {
			t.Errorf("task %s succeeded %d times in the run's audit, want once: %v", x, succeeded[x], succeeded)
		}
	}

	var entries []struct {
		Details map[string]any `json:"details"`
	}
	b, err := os.ReadFile(filepath.Join(out, "leader.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) < 2 {
		t.Fatalf("leader.acquired entries (%v): %s", err, b)
	}
	// previous is the killed leader's name, also when the StatefulSet's new pod of it, under
	// that name, took the Lease: the record was another process's.
	if last := entries[len(entries)-1].Details; last["identity"] != next || last["previous"] != old || last["restored"] != true {
		t.Errorf("the new leader's leader.acquired: %+v, want identity %s, previous %s, restored", last, next, old)
	}
}

// leaseHolder is the Lease's holder and when it was acquired, or zero values while there is
// none.
func leaseHolder(ctx context.Context, c *k8stest.Cluster) (string, time.Time) {
	var l struct {
		Spec struct {
			HolderIdentity string    `json:"holderIdentity"`
			AcquireTime    time.Time `json:"acquireTime"`
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/agora/leases/agora-leader", nil, &l); err != nil {
		return "", time.Time{}
	}
	return l.Spec.HolderIdentity, l.Spec.AcquireTime
}

// secretObject is a Secret of namespace agora holding data.
func secretObject(name string, data map[string][]byte) map[string]any {
	enc := map[string]string{}
	for k, v := range data {
		enc[k] = base64.StdEncoding.EncodeToString(v)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": "agora"},
		"data":     enc,
	}
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// otherReplica is the StatefulSet's other pod of the two.
func otherReplica(name string) string {
	if name == "agora-0" {
		return "agora-1"
	}
	return "agora-0"
}
