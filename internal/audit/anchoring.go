package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// maxAnchorError caps the error text recorded for a failed anchor.
const maxAnchorError = 1000

// Anchor keeps evidence of each checkpoint somewhere the database's owner cannot silently
// rewrite. Implementations live in package anchor.
type Anchor interface {
	// Name identifies the anchor in evidence, records and errors, e.g.
	// "file:/mnt/worm/agora.anchor". It MUST NOT contain credentials.
	Name() string
	// Anchor records the signed checkpoint and returns evidence bound to its bytes. An
	// anchor that keeps earlier checkpoints MUST first call checkPrevious with the latest it
	// holds (nil when it holds none), under whatever lock orders its writers, and MUST
	// refuse to record when checkPrevious fails: that is how rollback and truncation of the
	// log, or of the anchor, are caught.
	Anchor(ctx context.Context, checkpoint []byte, checkPrevious func(ctx context.Context, previous []byte) error) (verify.Evidence, error)
}

// ErrRollback is matched (with [errors.Is]) when an anchor holds less than this log once
// anchored there: the anchor was truncated or replaced.
var ErrRollback = errors.New("audit anchor rolled back")

// CheckpointResult is what [Checkpointer.Checkpoint] and [Checkpointer.MaybeCheckpoint] did.
type CheckpointResult struct {
	// Checkpoint is the latest checkpoint, new or not.
	Checkpoint StoredCheckpoint
	// Created is true when Checkpoint was written by this call.
	Created bool
	// Anchors has one result per anchor that was asked to anchor Checkpoint.
	Anchors []AnchorResult
}

// AnchorResult is one anchor's outcome.
type AnchorResult struct {
	Name     string
	Evidence *verify.Evidence // nil when Err is set
	Err      error
}

// Err joins the anchors' errors; nil when every anchor asked accepted the checkpoint.
func (r *CheckpointResult) Err() error {
	var errs []error
	for _, a := range r.Anchors {
		if a.Err != nil {
			errs = append(errs, fmt.Errorf("anchor %s: %w", a.Name, a.Err))
		}
	}
	return errors.Join(errs...)
}

// Checkpoint writes a checkpoint if the log grew since the latest one, then hands the latest
// checkpoint to every anchor that has not accepted it yet. A failing anchor does not undo the
// checkpoint: its error is recorded and returned in the result. The error return is for the
// checkpoint itself (an [ErrInconsistent] log, a database error).
func (c *Checkpointer) Checkpoint(ctx context.Context) (*CheckpointResult, error) {
	cp, created, err := c.write(ctx)
	if err != nil {
		return nil, err
	}
	res := &CheckpointResult{Checkpoint: *cp, Created: created}
	for _, a := range c.opts.Anchors {
		done, err := c.anchored(ctx, a.Name(), cp.Size)
		if err != nil {
			return nil, err
		}
		if done {
			continue
		}
		ar := c.anchorOne(ctx, a, cp)
		if err := c.record(ctx, a.Name(), cp.Size, ar); err != nil {
			return nil, err
		}
		res.Anchors = append(res.Anchors, ar)
	}
	return res, nil
}

// MaybeCheckpoint runs [Checkpointer.Checkpoint] when one is due: at least Every entries, or
// any entry and at least Interval, since the latest checkpoint. It returns nil when none was
// due. Short-lived processes call it after committing; long-lived ones use [Checkpointer.Run].
func (c *Checkpointer) MaybeCheckpoint(ctx context.Context) (*CheckpointResult, error) {
	due, err := c.Due(ctx)
	if err != nil || !due {
		return nil, err
	}
	return c.Checkpoint(ctx)
}

// Due reports whether a checkpoint is due.
func (c *Checkpointer) Due(ctx context.Context) (bool, error) {
	q := c.db.SQL()
	var size int64
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM audit_entries`).Scan(&size); err != nil {
		return false, fmt.Errorf("read audit log size: %w", err)
	}
	prev, err := LatestCheckpoint(ctx, q)
	if err != nil {
		return false, err
	}
	var since time.Time
	var grown int64
	if prev == nil {
		grown = size
		var at string
		err := q.QueryRowContext(ctx, `SELECT at FROM audit_entries WHERE seq = 0`).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read audit log: %w", err)
		}
		if since, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return false, fmt.Errorf("read audit entry 0: time %q: %w", at, ErrTampered)
		}
	} else {
		grown, since = size-int64(prev.Size), prev.At
	}
	return grown >= int64(c.opts.Every) || (grown > 0 && c.opts.Now().Sub(since) >= c.opts.Interval), nil
}

// Run calls [Checkpointer.MaybeCheckpoint] every tick until ctx is done, logging anchor
// failures. It returns ctx's error, or at once an [ErrInconsistent] or [ErrTampered] error:
// a log in that state needs an operator, not a retry.
func (c *Checkpointer) Run(ctx context.Context, tick time.Duration) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		res, err := c.MaybeCheckpoint(ctx)
		switch {
		case errors.Is(err, ErrInconsistent) || errors.Is(err, ErrTampered):
			return err
		case err != nil:
			c.opts.Logger.Warn("audit checkpoint", "log", c.opts.LogName, "err", err)
		case res != nil && res.Err() != nil:
			c.opts.Logger.Warn("audit anchor", "log", c.opts.LogName, "size", res.Checkpoint.Size, "err", res.Err())
		}
	}
}

func (c *Checkpointer) anchorOne(ctx context.Context, a Anchor, cp *StoredCheckpoint) AnchorResult {
	check := func(ctx context.Context, previous []byte) error {
		return c.checkAnchored(ctx, a.Name(), previous, cp)
	}
	ev, err := a.Anchor(ctx, cp.Note, check)
	if err != nil {
		return AnchorResult{Name: a.Name(), Err: err}
	}
	return AnchorResult{Name: a.Name(), Evidence: &ev}
}

// CheckHeld checks a signed checkpoint held outside the log (where names it: an anchor) against
// the log as it is: it must verify under the log's key and be a prefix of the log. A log
// shorter than the checkpoint (restored from an older copy) is an [*InconsistencyError].
// It returns the checkpoint's size.
func (c *Checkpointer) CheckHeld(ctx context.Context, where string, checkpoint []byte) (uint64, error) {
	q := c.db.SQL()
	size, err := TreeSize(ctx, q)
	if err != nil {
		return 0, err
	}
	root, err := RootAt(ctx, q, size)
	if err != nil {
		return 0, err
	}
	prev, err := c.checkPrefix(ctx, q, where, checkpoint, size, root)
	return prev.Size, err
}

// checkAnchored checks the latest checkpoint an anchor holds against the log and against what
// the log recorded anchoring there.
func (c *Checkpointer) checkAnchored(ctx context.Context, name string, previous []byte, cp *StoredCheckpoint) error {
	var recorded sql.NullInt64
	err := c.db.SQL().QueryRowContext(ctx,
		`SELECT MAX(size) FROM audit_anchors WHERE anchor = ? AND evidence IS NOT NULL`, name).Scan(&recorded)
	if err != nil {
		return fmt.Errorf("read audit anchor records: %w", err)
	}
	if previous == nil {
		if recorded.Valid {
			return fmt.Errorf("%w: %s holds no checkpoint, but this log anchored checkpoint %d there", ErrRollback, name, recorded.Int64)
		}
		return nil
	}
	// Compare with the log as it is now: another process may have anchored a later
	// checkpoint since cp was written.
	q := c.db.SQL()
	size, err := TreeSize(ctx, q)
	if err != nil {
		return err
	}
	root, err := RootAt(ctx, q, size)
	if err != nil {
		return err
	}
	prev, err := c.checkPrefix(ctx, q, name, previous, size, root)
	if err != nil {
		return err
	}
	if prev.Size > cp.Size {
		return fmt.Errorf("%s already holds the later checkpoint %d; not appending %d after it", name, prev.Size, cp.Size)
	}
	if recorded.Valid && int64(prev.Size) < recorded.Int64 {
		return fmt.Errorf("%w: %s ends at checkpoint %d, but this log anchored checkpoint %d there", ErrRollback, name, prev.Size, recorded.Int64)
	}
	return nil
}

// anchored reports whether anchor name accepted the checkpoint of size.
func (c *Checkpointer) anchored(ctx context.Context, name string, size uint64) (bool, error) {
	var n int
	err := c.db.SQL().QueryRowContext(ctx,
		`SELECT COUNT(*) FROM audit_anchors WHERE size = ? AND anchor = ? AND evidence IS NOT NULL`, int64(size), name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read audit anchor records: %w", err)
	}
	return n > 0, nil
}

func (c *Checkpointer) record(ctx context.Context, name string, size uint64, ar AnchorResult) error {
	var evidence []byte
	var errText any
	typ, _, _ := strings.Cut(name, ":")
	if ar.Err != nil {
		msg := ar.Err.Error()
		if len(msg) > maxAnchorError {
			msg = msg[:maxAnchorError] + "..."
		}
		errText = msg
	} else {
		b, err := json.Marshal(ar.Evidence)
		if err != nil {
			return fmt.Errorf("record audit anchor %s: %w", name, err)
		}
		evidence, typ = b, ar.Evidence.Type
	}
	return c.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_anchors(size, anchor, type, evidence, error, at) VALUES (?, ?, ?, ?, ?, ?)`,
			int64(size), name, typ, evidence, errText, c.opts.Now().UTC().Format(time.RFC3339Nano))
		if err != nil {
			return fmt.Errorf("record audit anchor %s: %w", name, err)
		}
		return nil
	})
}
