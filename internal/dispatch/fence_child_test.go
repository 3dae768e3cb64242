package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lease/fencefile"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/agora-dev/agora/internal/workerbin"
)

// The child of TestFence_ChildSupervisor: a supervisor a leader started, over the parent's
// home, with a provider whose task is files in fenceDirEnv.
const (
	fenceChildRole = "fence-supervisor"
	fenceHomeEnv   = "AGORA_TEST_FENCE_HOME"
	fenceIDEnv     = "AGORA_TEST_FENCE_ID"
	fenceDirEnv    = "AGORA_TEST_FENCE_DIR"
	fenceWorkerEnv = "AGORA_TEST_FENCE_WORKER"
)

// fileProvider's one task is a directory's files: "started" once Start ran, "cancelled" once
// Cancel did; it ends when "end" appears. It stands for a Kubernetes Job the new leader may
// have adopted: whoever stops it stops the new leader's dispatch.
type fileProvider struct{ dir string }

func (p fileProvider) Start(context.Context, compute.Spec) (compute.Handle, error) {
	return fileHandle(p), os.WriteFile(filepath.Join(p.dir, "started"), nil, 0o600)
}

func (p fileProvider) Cancel(context.Context, string) error {
	return os.WriteFile(filepath.Join(p.dir, "cancelled"), nil, 0o600)
}

type fileHandle struct{ dir string }

func (h fileHandle) TaskID() string { return "task-of-the-old-leader" }

func (h fileHandle) Wait() (compute.Exit, error) {
	for {
		if _, err := os.Stat(filepath.Join(h.dir, "end")); err == nil {
			return compute.Exit{Code: 0}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fenceChild supervises the dispatch as `agora dispatch supervise` does under a leader: the
// fence its environment names is kept first (cli.keepLeaderFence).
func fenceChild(t *testing.T) {
	ctx := context.Background()
	check, _, ok := fencefile.FromEnv()
	if !ok {
		t.Fatal("no leader fence in the environment")
	}
	store.SetFence(check)
	dir := os.Getenv(fenceHomeEnv)
	h, err := home.Open(ctx, dir, agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	reader := view.New(h.DB, h.Blobs)
	d := &dispatch.Dispatcher{
		Records: dispatch.NewRecords(h.DB, audit.New(nil), nil),
		Catalog: reader,
		Blobs:   h.Blobs,
		Unseal: func(ctx context.Context, ref string) ([]byte, error) {
			s, err := reader.Sealed(ctx, ref)
			if err != nil {
				return nil, err
			}
			return sealer.Open(ref, s)
		},
		LocalProvider: fileProvider{dir: os.Getenv(fenceDirEnv)},
		Config:        h.Config,
		StateDir:      filepath.Join(dir, home.DispatchDir),
		Worker: dispatch.WorkerBinary{Path: os.Getenv(fenceWorkerEnv),
			Pinner: &workerbin.Pinner{Dir: filepath.Join(dir, workerbin.DirName)}},
		Runtimes: &runtimebin.Resolver{PATH: t.TempDir()},
	}
	final, err := d.Supervise(ctx, os.Getenv(fenceIDEnv), nil)
	if err != nil {
		t.Fatalf("supervise: %v", err)
	}
	t.Logf("ended %s/%s", final.State, final.Reason)
}

// TestFence_ChildSupervisor: a supervisor started by a leader (a real process of its own)
// keeps the leader's fence. While the leader renews it claims, starts and ends its dispatch;
// once the leader stops renewing (paused, partitioned) and the deadline passes, the sandbox's
// end finds it fenced: it commits nothing, leaves the task alone (no Cancel: a new leader may
// have adopted it), releases its local stage (no leader elsewhere can use it) and says so in
// its log.
func TestFence_ChildSupervisor(t *testing.T) {
	if os.Getenv(pid1Role) == fenceChildRole {
		fenceChild(t)
		return
	}
	for _, renew := range []bool{true, false} {
		name := map[bool]string{true: "renewed", false: "deadline passed"}[renew]
		t.Run(name, func(t *testing.T) { fenceChildRun(t, renew) })
	}
}

func fenceChildRun(t *testing.T, renew bool) {
	e := newEnv(t)
	e.subagent("quick", "echo done")
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "quick", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const valid = 800 * time.Millisecond
	w, err := fencefile.Create(filepath.Join(e.home.Dir, "leader.fence"), valid)
	if err != nil {
		t.Fatal(err)
	}
	var renewing atomic.Bool
	renewing.Store(true)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if renewing.Load() {
				w.Advance(bootNow(t) + int64(valid))
			}
			select {
			case <-stop:
				return
			case <-time.After(valid / 8):
			}
		}
	}()
	defer func() { close(stop); <-done }()

	task := t.TempDir()
	c := exec.Command(os.Args[0], "-test.run=^TestFence_ChildSupervisor$", "-test.v")
	c.Env = append(fencefile.ChildEnv(os.Environ()), w.Env(), pid1Role+"="+fenceChildRole, fenceHomeEnv+"="+e.home.Dir,
		fenceIDEnv+"="+r.ID, fenceDirEnv+"="+task, fenceWorkerEnv+"="+e.d.Worker.Path)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			c.Process.Kill()
			<-exited
		}
	}()
	// Claimed and started under the renewed fence: both are commits of the child.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cur, err := e.d.Records.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State == lifecycle.DispatchStarted {
			break
		}
		if time.Now().After(deadline) || lifecycle.DispatchEnded(cur.State) {
			t.Fatalf("the child never recorded the dispatch started (%s %s: %s):\n%s", cur.State, cur.Reason, cur.Detail, out.String())
		}
	}
	if !renew {
		renewing.Store(false) // the leader is stopped
		time.Sleep(valid + 200*time.Millisecond)
	} else {
		time.Sleep(2 * valid) // more than one validity: only renewals keep it open
	}
	if err := os.WriteFile(filepath.Join(task, "end"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var werr error
	select {
	case werr = <-exited:
		exited <- werr
	case <-time.After(60 * time.Second):
		t.Fatalf("the child did not exit after its task ended:\n%s", out.String())
	}
	final, err := e.d.Records.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, cancelled := os.Stat(filepath.Join(task, "cancelled"))
	_, staged := os.Stat(filepath.Join(e.d.StateDir, r.ID, wire.BundleDir))
	if renew {
		if werr != nil || !lifecycle.DispatchEnded(final.State) {
			t.Errorf("a supervisor under a renewed fence: exit %v, record %s; want its end recorded:\n%s", werr, final.State, out.String())
		}
		return
	}
	var xe *exec.ExitError
	if !errors.As(werr, &xe) {
		t.Errorf("a fenced supervisor exited %v, want a failure", werr)
	}
	if final.State != lifecycle.DispatchStarted {
		t.Errorf("a fenced supervisor committed the dispatch's end: %s/%s", final.State, final.Reason)
	}
	if cancelled == nil {
		t.Error("a fenced supervisor cancelled the task the new leader may have adopted")
	}
	// A local target's stage is this home's alone (the new leader's home is another): the
	// fenced supervisor releases it, as it would after recording the end.
	if staged == nil {
		t.Error("a fenced supervisor left a local sandbox's stage in its home")
	}
	log := out.String()
	if !strings.Contains(log, "leaving the dispatch's end to the leader that holds the lease") || !strings.Contains(log, "not renewed in time") {
		t.Errorf("the fenced supervisor's log does not say it left the end to the leader:\n%s", log)
	}
	// What it left is the next leader's, as a killed supervisor's is: its reap ends the
	// dispatch and releases the stage (here, a local target's: it is not adoptable).
	e.d.LocalProvider = fileProvider{dir: task}
	if _, err := e.d.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if reaped, err := e.d.Records.Get(ctx, r.ID); err != nil || reaped.State != lifecycle.DispatchFailed || reaped.Reason != lifecycle.ReasonLost {
		t.Errorf("the leader's reap of what the fenced supervisor left: %v %v, want failed/lost", reaped.State, err)
	}
}

func bootNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}
