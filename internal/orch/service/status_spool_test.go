package service_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/service"
)

// holdExec holds every attempt of a task named hold until the test ends, and ends every
// other attempt succeeded at once.
type holdExec struct{}

func (holdExec) Start(_ context.Context, a orch.Attempt, done func(orch.Outcome)) {
	if a.TaskID != "hold" {
		go done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
	}
}
func (holdExec) Cancel(context.Context, string) {}

// bigPlan is a plan of n tasks that all wait for hold: its status is well over a MB.
func bigPlan(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version": 1, "name": "big", "concurrency": 1, "tasks": [{"id": "hold", "subagent": "worker"}`)
	for i := range n - 1 {
		fmt.Fprintf(&b, `, {"id": "a-task-with-a-longer-name-%05d", "subagent": "worker", "depends_on": ["hold"]}`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestServe_StatusOfALargeRun: the status of a run too large to keep in memory whole
// (written through the spool's file) is the engine's, and leaves no file behind. Clients
// that ask for it and then stop reading, more of them than orch.db has connections, hold
// none of them: another run still commits to its end, and another status is answered.
func TestServe_StatusOfALargeRun(t *testing.T) {
	spool := t.TempDir()
	srv := &service.Server{Spool: spool}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	ctx := t.Context()
	sub, err := c.Submit(ctx, api.SubmitRequest{File: "big.json", Source: bigPlan(12000), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Run.ID
	got, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := srv.Engine.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 12000 {
		t.Fatalf("the status holds %d tasks, want 12000", len(got.Tasks))
	}
	got.QueueState = nil // the service's addition
	if a, b := agoratest.PlainJSON(t, got), agoratest.PlainJSON(t, want); !reflect.DeepEqual(a, b) {
		t.Errorf("the service's status differs from the engine's")
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("the spool directory holds %v", left)
	}

	// Clients that read the first bytes of the status and then stop.
	stallReaders(t, sock, "/v1/runs/"+id, 6)
	anotherRunEnds(t, c)
}

// stallReaders has n clients ask for path on sock, read the answer's first line and then
// read no more (until the test ends): each one's answer waits on its write.
func stallReaders(t *testing.T, sock, path string, n int) {
	t.Helper()
	for range n {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() }) // before the server stops: its handler waits on the write
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: orch\r\n\r\n", path)
		// An answer that does not begin is a read waiting for a connection the clients
		// before hold.
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(line, "200") {
			t.Fatalf("a stalled client's answer to %s begins %q: %v", path, line, err)
		}
	}
}

// anotherRunEnds submits a run of two tasks and waits for it to succeed: the engine still
// commits.
func anotherRunEnds(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := t.Context()
	other, err := c.Submit(ctx, api.SubmitRequest{File: "small.json", Actor: "test",
		Source: []byte(`{"version": 1, "name": "small", "tasks": [{"id": "a", "subagent": "worker"}, {"id": "b", "subagent": "worker", "depends_on": ["a"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 30*time.Second, "another run to end while clients stall", func() bool {
		// A status read that waits for a connection the stalled clients hold fails the wait,
		// not the test's deadline.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := c.Status(ctx, other.Run.ID)
		return err == nil && r.State == lifecycle.RunSucceeded
	})
}
