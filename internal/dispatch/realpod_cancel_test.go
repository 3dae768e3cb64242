package dispatch_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestDispatch_RealPodFailsAndCancels: on a real node, an agent that exits 3 fails its
// dispatch as it does under bubblewrap, and a cancel of a running pod's dispatch records it
// cancelled and leaves no process of it running: kwok has no processes, so only a real node
// shows that the agent really stops (its sleep would otherwise outlive the Job by minutes).
func TestDispatch_RealPodFailsAndCancels(t *testing.T) {
	n := startPodNode(t)
	e := newEnv(t)
	e.addPodTarget(n)

	t.Run("agent-fails", func(t *testing.T) {
		e.subagent("failer", `echo trying; exit 3`)
		r := e.run(dispatch.Request{Subagent: "failer", Target: "pod", Timeout: 3 * time.Minute})
		if r.State != lifecycle.DispatchFailed {
			t.Fatalf("state %s (%s: %s), want failed", r.State, r.Reason, r.Detail)
		}
		if !strings.Contains(e.stdout(r), "trying") {
			t.Errorf("stdout %q, want the agent's output", e.stdout(r))
		}
		t.Logf("failed: %s: %s", r.Reason, r.Detail)
	})

	// An agent that leaves an output nobody may read (the pod runs
	// as a non-root uid, the worker's own) had its worker retry the upload as if the gateway
	// were down, for 3 minutes, and the dispatch recorded gateway-unreachable (retried by
	// plans, the agent not blamed). It is the agent's doing: the worker's own failure,
	// recorded at once, naming the file (netgw's TestRedTeam4_UnreadableOutputIsNotAGatewayOutage).
	t.Run("redteam4-unreadable-output", func(t *testing.T) {
		e.subagent("locker", `mkdir -p /agora/out/outputs && echo hidden > /agora/out/outputs/locked && chmod 000 /agora/out/outputs/locked`)
		r := e.run(dispatch.Request{Subagent: "locker", Target: "pod", Timeout: 3 * time.Minute})
		if r.State != lifecycle.DispatchFailed || r.Reason == lifecycle.ReasonGatewayUnreachable || !strings.Contains(r.Detail, "locked") {
			t.Fatalf("state %s (%s: %s), want failed by the worker, naming the unreadable output", r.State, r.Reason, r.Detail)
		}
		t.Logf("failed: %s: %s", r.Reason, r.Detail)
	})

	t.Run("cancel", func(t *testing.T) {
		e.subagent("sleeper", `echo started; sleep 300`)
		ctx := t.Context()
		r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "sleeper", Target: "pod", Timeout: 4 * time.Minute, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		type ended struct {
			rec *dispatch.Record
			err error
		}
		done := make(chan ended, 1)
		go func() {
			// No t.Error here: a failed wait below ends the test before Supervise returns.
			rec, err := e.d.Supervise(ctx, r.ID, nil)
			done <- ended{rec, err}
		}()
		// Cancel once the agent runs: the worker container is running and the agent's sleep
		// is among its processes.
		n.waitWorkerRunning(t)
		if !agoratest.Poll(2*time.Minute, func() bool { return n.sleepRunning(t) }) {
			t.Fatalf("no sleep among containerd's tasks' processes within 2 minutes:\n%s", n.ps(t))
		}
		t.Logf("before the cancel:\n%s", n.ps(t))
		if _, err := e.d.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		var final *dispatch.Record
		select {
		case end := <-done:
			if end.err != nil {
				t.Fatal(end.err)
			}
			final = end.rec
		case <-time.After(2 * time.Minute):
			t.Fatal("the dispatch did not end within 2 minutes of the cancel")
		}
		t.Logf("after the cancel:\n%s", n.ps(t))
		if final == nil || final.State != lifecycle.DispatchCancelled {
			t.Fatalf("dispatch ended %+v, want cancelled", final)
		}
		if n.sleepRunning(t) {
			t.Errorf("the agent's sleep still runs after the cancel:\n%s", n.ps(t))
		}
		var jobs struct{ Items []any }
		if err := n.c.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs", nil, &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if strings.Contains(strings.ToLower(toJSON(t, j)), strings.ToLower(r.ID)) {
				t.Errorf("the cancelled dispatch's Job is still there: %s", toJSON(t, j))
			}
		}
	})
}

// waitWorkerRunning waits until a pod of the namespace has its worker container running.
func (n *podNode) waitWorkerRunning(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		var pods struct {
			Items []struct {
				Status struct {
					ContainerStatuses []struct {
						Name  string
						State struct{ Running *struct{} }
					}
				}
			}
		}
		if err := n.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+n.c.Namespace+"/pods", nil, &pods); err == nil {
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if c.Name == "worker" && c.State.Running != nil {
						return
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no pod's worker container ran within 2 minutes:\n%s", n.podLogs(t))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sleepRunning reports whether a `sleep 300` runs in any of containerd's tasks, read from
// the host's /proc through `ctr tasks ps` of each running task.
func (n *podNode) sleepRunning(t *testing.T) bool {
	t.Helper()
	return strings.Contains(n.ps(t), "sleep 300")
}

// ps is the command line of every process of every task containerd runs.
func (n *podNode) ps(t *testing.T) string {
	t.Helper()
	out, err := n.c.Ctr(t.Context(), "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		ps, err := n.c.Ctr(t.Context(), "tasks", "ps", f[0])
		if err != nil {
			continue // ended between ls and ps
		}
		for _, pl := range strings.Split(string(ps), "\n")[1:] {
			pf := strings.Fields(pl)
			if len(pf) == 0 {
				continue
			}
			cmd, _ := readCmdline(pf[0])
			b.WriteString(f[0][:12] + " " + pf[0] + " " + cmd + "\n")
		}
	}
	return b.String()
}
