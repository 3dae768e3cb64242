package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam43_ReapSparesADispatchClaimedMeanwhile: Reap decides from the live records it
// listed, then records each end (audit before effect) and releases the stage. A dispatch
// accepted by a supervisor that died is taken over by a new one (detach.Watch spawns it,
// Records.Claim lets it in because the recorded supervisor is gone) while a Reap of the same
// home, in serve or any command that reads records, works through its list. Finish checked
// only that the record was live: the reap recorded failed/lost a dispatch a live supervisor
// now held (its end on record, audited, the plan retrying it), then removed that supervisor's
// staged workspace under it. The end Reap records must be the one it decided: the record's
// supervisor still the dead one it saw.
func TestRedTeam43_ReapSparesADispatchClaimedMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.subagent("long", "sleep 1000")
	ctx := t.Context()
	const n = 60
	ids := make([]string, n)
	for i := range ids {
		r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
		// Accepted by a supervisor that is gone (pid 2^22+1 is never allocated).
		if _, err := e.home.DB.SQL().ExecContext(ctx, `UPDATE dispatches SET supervisor = '4194305:1' WHERE id = ?`, r.ID); err != nil {
			t.Fatal(err)
		}
		// What the new supervisor stages once it holds the dispatch.
		ws := filepath.Join(e.d.StateDir, r.ID, wire.WorkspaceDir)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "work"), []byte("the new supervisor's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reaped := make(chan error, 1)
	go func() {
		_, err := e.d.Reap(context.WithoutCancel(ctx))
		reaped <- err
	}()
	// Once Reap has listed the live records (it has ended one), take the others over from
	// the end of its list, as a new supervisor does.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		var ended int
		if err := e.home.DB.SQL().QueryRowContext(ctx, `SELECT count(*) FROM dispatches WHERE state = ?`, lifecycle.DispatchFailed).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if ended > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Reap ended no dispatch")
		}
	}
	var claimed []string
	for i := n - 1; i >= 0; i-- {
		err := e.d.Records.Claim(ctx, ids[i])
		switch {
		case err == nil:
			claimed = append(claimed, ids[i])
		case !errors.Is(err, dispatch.ErrClaimed):
			t.Fatal(err)
		}
	}
	if err := <-reaped; err != nil {
		t.Fatal(err)
	}
	if len(claimed) == 0 {
		t.Skip("SKIP: Reap ended every dispatch before one was taken over: the race was not run")
	}
	t.Logf("%d of %d dispatches taken over while Reap ran", len(claimed), n)
	for _, id := range claimed {
		if t.Failed() {
			break // one is enough to read
		}
		r, err := e.d.Records.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != lifecycle.DispatchAccepted {
			t.Errorf("dispatch %s, taken over by a live supervisor, was recorded %s/%s by Reap: %s", id, r.State, r.Reason, r.Detail)
		}
		if _, err := os.Stat(filepath.Join(e.d.StateDir, id, wire.WorkspaceDir, "work")); err != nil {
			t.Errorf("dispatch %s, taken over by a live supervisor: Reap removed its staged workspace: %v", id, err)
		}
	}
}

// rt43ReapRole, in pid1Role, makes the test binary the reaper TestRedTeam43_ReapKilledBetween
// EndAndStop kills: it reaps the home named by rt43HomeEnv with a provider whose Cancel
// never returns.
const (
	rt43ReapRole = "redteam43-reaper"
	rt43HomeEnv  = "AGORA_TEST_RT43_HOME"
	rt43Marker   = "rt43-cancelling"
)

// stuckProvider's Cancel says it was called (a file in dir) and never returns.
type stuckProvider struct{ dir string }

func (p stuckProvider) Start(context.Context, compute.Spec) (compute.Handle, error) {
	return nil, errors.New("not for starting")
}

func (p stuckProvider) Cancel(context.Context, string) error {
	_ = os.WriteFile(filepath.Join(p.dir, rt43Marker), nil, 0o600)
	select {}
}

// killProvider stops the one task it knows, a process of the test's, and notes what the
// dispatch's record said then.
type killProvider struct {
	records  *dispatch.Records
	id, task string
	proc     *exec.Cmd
	state    string // the record's state at Cancel; "" when Cancel was not called
}

func (p *killProvider) Start(context.Context, compute.Spec) (compute.Handle, error) {
	return nil, errors.New("not for starting")
}

func (p *killProvider) Cancel(ctx context.Context, taskID string) error {
	if taskID != p.task {
		return fmt.Errorf("no task %s", taskID)
	}
	r, err := p.records.Get(ctx, p.id)
	if err != nil {
		return err
	}
	p.state = r.State
	p.proc.Process.Kill()
	p.proc.Wait()
	return nil
}

// TestRedTeam43_ReapKilledBetweenEndAndStop: Reap records a dispatch's end before it has the
// provider stop its task. A reap killed with -9 in between (here: while the provider's Cancel
// runs) leaves a terminal record (failed/lost, audited), its sandbox still running as its
// leased uid, and its stage in the held index. The uid must stay taken while that sandbox
// runs (the held entry keeps it, see claimUID), and the next Reap must stop the task, release
// the stage and give the uid back, without ending the dispatch again or otherwise.
func TestRedTeam43_ReapKilledBetweenEndAndStop(t *testing.T) {
	if os.Getenv(pid1Role) == rt43ReapRole {
		rt43Reap(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the sandbox's stand-in runs as a leased uid only for root")
	}
	e := newEnv(t)
	e.subagent("long", "sleep 1000")
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Started by a supervisor now gone (pid 2^22+1 is never allocated), its sandbox still
	// running: a process of the dispatch's leased uid, its lease file naming the dispatch, its
	// stage held.
	const task = "task-of-a-dead-supervisor"
	if err := e.d.Records.Started(ctx, r.ID, task, "4194305:1"); err != nil {
		t.Fatal(err)
	}
	uid := config.UID(config.DefaultSandboxUID).For(r.ID)
	for _, f := range []struct{ dir, name, body string }{
		{".uids", strconv.FormatUint(uint64(uid), 10), r.ID},
		{".held", r.ID, ""},
		{filepath.Join(r.ID, wire.WorkspaceDir), "work", "the dispatch's"},
	} {
		if err := os.MkdirAll(filepath.Join(e.d.StateDir, f.dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.d.StateDir, f.dir, f.name), []byte(f.body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sandbox := exec.Command("sleep", "600")
	sandbox.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := sandbox.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sandbox.Process.Kill(); sandbox.Wait() }()

	reaper := exec.Command(os.Args[0], "-test.run=^TestRedTeam43_ReapKilledBetweenEndAndStop$")
	reaper.Env = append(os.Environ(), pid1Role+"="+rt43ReapRole, rt43HomeEnv+"="+e.home.Dir)
	var out bytes.Buffer // read once the reaper is waited for
	reaper.Stdout, reaper.Stderr = &out, &out
	if err := reaper.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.home.Dir, rt43Marker)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			reaper.Process.Kill()
			reaper.Wait()
			t.Fatalf("the reaper never had the provider stop the task:\n%s", out.String())
		}
	}
	reaper.Process.Kill()
	reaper.Wait()

	// What the killed reap left: the end on record, the sandbox running, its stage held.
	ended, err := e.d.Records.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != lifecycle.DispatchFailed || ended.Reason != lifecycle.ReasonLost {
		t.Fatalf("the reap stopped the task while the record said %s/%s: the end must be on record first", ended.State, ended.Reason)
	}
	if _, err := os.Stat(filepath.Join(e.d.StateDir, ".held", r.ID)); err != nil {
		t.Fatalf("the killed reap's dispatch is out of the held index while its sandbox runs (its uid is free): %v", err)
	}
	// Anything that reads records first reaps: `dispatch cancel` of the ended dispatch.
	p := &killProvider{records: e.d.Records, id: r.ID, task: task, proc: sandbox}
	e.d.LocalProvider = p
	n, err := e.d.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the next Reap ended %d dispatches, want 0: this one was on record already", n)
	}
	if p.state == "" {
		t.Fatal("the next Reap never stopped the task the killed reap left running")
	}
	if _, err := os.Stat(filepath.Join(e.d.StateDir, ".held", r.ID)); !os.IsNotExist(err) {
		t.Errorf("the stage is still held after its task was stopped (%v): the uid stays taken", err)
	}
	if _, err := os.Stat(filepath.Join(e.d.StateDir, r.ID, wire.WorkspaceDir)); !os.IsNotExist(err) {
		t.Errorf("the stage's workspace is still there (%v)", err)
	}
	if left := procsOfUID(int(uid)); len(left) > 0 {
		t.Errorf("processes %v still run as the dispatch's uid", left)
	}
	final, err := cancelAsCLI(ctx, e.d, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != ended.State || final.Reason != ended.Reason || final.Detail != ended.Detail ||
		final.EndedAt == nil || !final.EndedAt.Equal(*ended.EndedAt) {
		t.Errorf("the record changed after its end: %s/%s %q at %v, was %s/%s %q at %v",
			final.State, final.Reason, final.Detail, final.EndedAt, ended.State, ended.Reason, ended.Detail, ended.EndedAt)
	}
}

// cancelAsCLI is `dispatch cancel` of id: it reaps, then cancels.
func cancelAsCLI(ctx context.Context, d *dispatch.Dispatcher, id string) (*dispatch.Record, error) {
	if _, err := d.Reap(ctx); err != nil {
		return nil, err
	}
	return d.Cancel(ctx, id)
}

// rt43Reap is the reaper's side: Reap the parent's home with a provider that never stops.
func rt43Reap(t *testing.T) {
	ctx := t.Context()
	dir := os.Getenv(rt43HomeEnv)
	h, err := home.Open(ctx, dir, agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := &dispatch.Dispatcher{
		Records:       dispatch.NewRecords(h.DB, audit.New(nil), nil),
		LocalProvider: stuckProvider{dir: dir},
		Config:        h.Config,
		StateDir:      filepath.Join(dir, home.DispatchDir),
	}
	_, err = d.Reap(ctx)
	t.Fatalf("Reap returned (%v): its provider's Cancel never does", err)
}
