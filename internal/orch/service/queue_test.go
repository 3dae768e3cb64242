package service_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// TestQueue_NeverOverlaps runs two plans on a queue of concurrency 1, each with two
// independent tasks and a run concurrency of 2: the four dispatches, as agora.db recorded
// them (from the moment each was recorded to its end), never overlap. A third run on the
// default queue runs beside them. Status shows the queue's running tasks and depth.
func TestQueue_NeverOverlaps(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	must(t, os.WriteFile(filepath.Join(e.home, "agora.yaml"), []byte("queues:\n  serial: {concurrency: 1}\n"), 0o600))
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	var ids []string
	for _, name := range []string{"first", "second"} {
		p := writePlan(t, name, "version: 1\nname: "+name+"\nqueue: serial\nconcurrency: 2\ntasks:\n  - {id: a, subagent: sleeper}\n  - {id: b, subagent: sleeper}\n")
		ids = append(ids, strings.TrimSpace(e.stdout("orch", "submit", p)))
	}
	other := strings.TrimSpace(e.stdout("orch", "submit", writePlan(t, "other", "version: 1\nname: other\ntasks: [{id: a, subagent: sleeper}]\n")))
	c := e.client()
	// While the first task sleeps, the queue has one running and three ready waiting.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.Status(context.Background(), ids[1])
		must(t, err)
		if q := r.QueueState; q != nil && q.Running == 1 && q.Depth == 3 {
			if q.Name != "serial" || q.Concurrency != 1 || q.Runs != 2 || r.Queue != "serial" {
				t.Errorf("queue state %+v of run on %q", q, r.Queue)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue state never showed 1 running and 3 waiting: %+v", r.QueueState)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := e.stdout("orch", "status")
	if !strings.Contains(out, "serial\t1\t1\t") || !strings.Contains(out, "default\t16\t") {
		t.Errorf("orch status lists the queues as:\n%s", out)
	}
	for _, id := range append(ids, other) {
		if r := waitRun(t, c, id, 2*time.Minute); r.State != lifecycle.RunSucceeded {
			t.Fatalf("run %s ended %s", id, r.State)
		}
	}
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	defer db.Close()
	var ivs []interval
	for _, id := range ids {
		rows, err := db.SQL().Query(`SELECT id, created_at, ended_at FROM dispatches WHERE actor LIKE ?`, "% via orch/"+id+"/%")
		must(t, err)
		for rows.Next() {
			var d, created, ended string
			must(t, rows.Scan(&d, &created, &ended))
			from, _ := time.Parse(time.RFC3339Nano, created)
			to, err := time.Parse(time.RFC3339Nano, ended)
			must(t, err)
			ivs = append(ivs, interval{id: d, task: id, from: from, to: to})
		}
		rows.Close()
	}
	if len(ivs) != 4 {
		t.Fatalf("%d dispatches of the two queued runs, want 4", len(ivs))
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].from.Before(ivs[j].from) })
	for i := 1; i < len(ivs); i++ {
		if ivs[i].from.Before(ivs[i-1].to) {
			t.Errorf("dispatches %s (%s, %s-%s) and %s (%s, %s-%s) overlap on a queue of 1", ivs[i-1].id, ivs[i-1].task, ivs[i-1].from, ivs[i-1].to,
				ivs[i].id, ivs[i].task, ivs[i].from, ivs[i].to)
		}
	}
	// The first run's tasks became ready first: the queue served them first.
	if !strings.Contains(ivs[0].task+ivs[1].task, ids[0]+ids[0]) {
		t.Errorf("the queue served %s and %s first, want both of %s", ivs[0].task, ivs[1].task, ids[0])
	}
}

// TestQueue_UnknownRefused: a plan naming a queue agora.yaml does not declare is refused by
// validate (with the catalog present) and by submit, naming the declared queues, with every
// other problem of the plan.
func TestQueue_UnknownRefused(t *testing.T) {
	e := servedEnv(t)
	p := writePlan(t, "p", "version: 1\nname: p\nqueue: nighty\ntasks: [{id: a, subagent: nobody}]\n")
	for _, args := range [][]string{{"orch", "validate", p}, {"orch", "submit", p}} {
		cmd := exec.Command(agoraBin, args...)
		cmd.Env = e.vars
		out, err := cmd.CombinedOutput()
		for _, want := range []string{`p.yaml:3: queue: queue "nighty" is not declared in agora.yaml; known: default`, `tasks[0].subagent: subagent "nobody" not found`} {
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("agora %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, want)
			}
		}
	}
	runs, err := e.client().Runs(context.Background(), 10)
	if err != nil || len(runs) != 0 {
		t.Errorf("runs after refusals: %v %v", runs, err)
	}
}
