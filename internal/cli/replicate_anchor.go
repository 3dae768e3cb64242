package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
)

// replicatedFirst holds an action back until the replica in object storage holds what was
// committed before it: an anchor (below) and a kubernetes dispatch's pod (replicate_export.go).
// It anchors a checkpoint only once the replica holds it (replicate.s3). A checkpoint anchored ahead of the replica would make the restore after
// a lost disk fail: the restored log would be shorter than the anchored checkpoint, which is
// exactly what the restore's anchor check refuses as a rollback (the drill
// TestRedTeam33_DrillKill9RestoreRestart shows it). So, while a serve replicates the log's database, the
// anchor waits until serve's status file (DB-replicate.json) says a read snapshot taken after
// the checkpoint was committed is in the bucket; if it is not within replicaWait, the anchor
// fails (recorded, and tried again with a later checkpoint), never anchors ahead.
type replicatedFirst struct {
	inner  audit.Anchor
	status string // DIR/DB-replicate.json
	lock   string // the database's DB-replicate.lock, held by the process that replicates it
	wait   time.Duration
	poll   time.Duration
}

// replicaWait is how long an anchor waits for the replica, in lags, beyond a fixed floor.
const (
	replicaWaitLags  = 10
	replicaWaitFloor = 10 * time.Second
)

// anchorsAfterReplica wraps anchors of logName when h replicates it.
func anchorsAfterReplica(h *home.Home, logName string, anchors []audit.Anchor) []audit.Anchor {
	if h.Config.Replicate.S3 == nil || len(anchors) == 0 {
		return anchors
	}
	db, path := "agora", filepath.Join(h.Dir, home.DBFile)
	if logName == home.OrchDB {
		db, path = "orch", filepath.Join(h.Dir, home.OrchDir, home.OrchDB)
	} else if logName != home.DBFile {
		return anchors
	}
	lag := h.Config.Replicate.LagOrDefault()
	out := make([]audit.Anchor, len(anchors))
	for i, a := range anchors {
		out[i] = replicatedFirst{inner: a, status: filepath.Join(h.Dir, db+"-"+replicate.PublishedFile), lock: path + "-replicate.lock",
			wait: replicaWaitFloor + replicaWaitLags*lag, poll: min(lag/4, 50*time.Millisecond)}
	}
	return out
}

func (a replicatedFirst) Name() string { return a.inner.Name() }

func (a replicatedFirst) Anchor(ctx context.Context, checkpoint []byte, check func(context.Context, []byte) error) (verify.Evidence, error) {
	if err := a.replicated(ctx, time.Now()); err != nil {
		return verify.Evidence{}, err
	}
	return a.inner.Anchor(ctx, checkpoint, check)
}

// replicated returns once the replica holds every commit before since, at once when no process
// replicates the database (nothing to wait for: the next serve's replicator starts with a full
// copy).
func (a replicatedFirst) replicated(ctx context.Context, since time.Time) error {
	if !a.replicating() {
		return nil
	}
	deadline := time.Now().Add(a.wait)
	for {
		var st replicate.Published
		b, err := cmdutil.ReadLimited(a.status, 64<<10)
		if err == nil && json.Unmarshal(b, &st) == nil && st.Replicated.After(since) {
			return nil
		}
		if time.Now().After(deadline) {
			why := "no status yet"
			if st.Error != "" {
				why = "last upload: " + st.Error
			} else if !st.Replicated.IsZero() {
				why = "replicated as of " + st.Replicated.UTC().Format(time.RFC3339Nano)
			}
			return fmt.Errorf("not anchored ahead of the replica: the replica did not hold this checkpoint within %s (%s); a restore would refuse a log shorter than its anchor", a.wait, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.poll):
		}
	}
}

// replicating reports whether a process holds the database's replication lock.
func (a replicatedFirst) replicating() bool {
	f, err := os.Open(a.lock)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true // cannot tell: wait, and fail closed if no replica comes
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
