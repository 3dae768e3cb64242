package retention_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// crashHomeEnv names the home the child process purges in TestPurge_Kill9BetweenRecordAndDelete.
const crashHomeEnv = "AGORA_RETENTION_CRASH_HOME"

// TestPurge_Kill9BetweenRecordAndDelete: a sweep killed (SIGKILL, a real process) after it
// recorded a batch and before it deleted the blobs leaves recorded purges whose blobs are
// still there, never a blob deleted without its record; the next sweep deletes them and
// records nothing twice.
func TestPurge_Kill9BetweenRecordAndDelete(t *testing.T) {
	if dir := os.Getenv(crashHomeEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	h := newHome(t)
	var ds []digest.Digest
	for i := range 20 {
		d := h.put(t, []byte{byte(i), 'p'}, longAgo)
		ds = append(ds, d)
		h.insert(t, disp{id: "d" + string(rune('a'+i)), state: "finished", ended: ago(100), patch: d})
	}
	marker := filepath.Join(h.dir, "recorded")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPurge_Kill9BetweenRecordAndDelete$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHomeEnv+"="+h.dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child never recorded its purge")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 0`); n != 40 {
		t.Fatalf("%d pending purges after the kill, want 40 (input and patch of 20 dispatches)", n)
	}
	entries := count(t, h.db.SQL(), `SELECT count(*) FROM audit_entries WHERE kind = 'retention.purged'`)
	if entries != 20 {
		t.Fatalf("%d retention.purged entries, want 20", entries)
	}
	for _, d := range ds {
		if !h.has(d) {
			t.Fatalf("blob %s deleted before the kill: the hook runs before any delete", d)
		}
	}
	plan, res, err := h.sweeper(policy).Run(context.Background(), "system", retention.RoleSweep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 0 || res.Recorded != 0 || res.Finished != 40 || plan.Pending() != 40 {
		t.Fatalf("restart: plan %d items, %d pending; result %+v: want the 40 recorded purges finished, none recorded again", len(plan.Items), plan.Pending(), res)
	}
	for _, d := range ds {
		if h.has(d) {
			t.Errorf("blob %s still stored after the restart's sweep", d)
		}
	}
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM audit_entries WHERE kind = 'retention.purged'`); n != entries {
		t.Fatalf("the restart recorded the purges again: %d entries", n)
	}
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 0`); n != 0 {
		t.Fatalf("%d purges still pending", n)
	}
}

// crashChild purges dir's home and stops (until killed) after the first batch is recorded.
func crashChild(t *testing.T, dir string) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(dir, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	bs, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	retention.SetAfterRecord(func() {
		os.WriteFile(filepath.Join(dir, "recorded"), nil, 0o600)
		agoratest.Hang() // until the parent kills it
	})
	s := &retention.Sweeper{DB: db, Blobs: bs, Policy: policy, Log: audit.New(nil), Now: func() time.Time { return now }}
	s.Run(ctx, "system", retention.RoleSweep, nil)
	t.Fatal("the sweep returned past the hook")
}
