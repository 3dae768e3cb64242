package audit

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

// Defaults for [CheckpointerOptions].
const (
	DefaultCheckpointEvery    = 100
	DefaultCheckpointInterval = 10 * time.Minute
)

// ErrInconsistent is matched (with [errors.Is]) when two views of a log cannot both be true:
// a stored or anchored checkpoint is not a prefix of the log, or is larger than it. No
// checkpoint is written over such a log.
var ErrInconsistent = errors.New("audit log is inconsistent with an earlier checkpoint")

// InconsistencyError is the evidence behind [ErrInconsistent]: which checkpoint, held where,
// disagrees with the log, and why.
type InconsistencyError struct {
	// Where holds the earlier checkpoint: "database" or an anchor's name.
	Where string
	// Earlier is the checkpoint held there; Size the log's size now; Root its root now.
	Earlier verify.Checkpoint
	Size    uint64
	Root    []byte
	// Reason says what does not match.
	Reason string
}

func (e *InconsistencyError) Error() string {
	return fmt.Sprintf("audit log of %d entries (root %x) is inconsistent with checkpoint %d (root %x) held by %s: %s",
		e.Size, e.Root, e.Earlier.Size, e.Earlier.Hash, e.Where, e.Reason)
}

// Is reports whether target is [ErrInconsistent].
func (e *InconsistencyError) Is(target error) bool { return target == ErrInconsistent }

// StoredCheckpoint is a signed checkpoint as the database holds it.
type StoredCheckpoint struct {
	verify.Checkpoint
	// Note is the C2SP signed note exactly as signed.
	Note []byte
	// At is when it was written.
	At time.Time
}

// CheckpointerOptions configures a [Checkpointer].
type CheckpointerOptions struct {
	// LogName is the log's database file name, the last part of the origin ("agora.db").
	LogName string
	// Signer signs checkpoints (keys/audit.key). Required.
	Signer note.Signer
	// VerifierKey is Signer's public verifier key (keys/audit.pub). Required; bundles carry it.
	VerifierKey string
	// Every writes a checkpoint once this many entries were appended since the last one.
	// 0 means [DefaultCheckpointEvery].
	Every int
	// Interval writes a checkpoint once this long has passed since the last one, if any entry
	// was appended. 0 means [DefaultCheckpointInterval].
	Interval time.Duration
	// Anchors receive every new checkpoint, in order.
	Anchors []Anchor
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives warnings from [Checkpointer.Run]; nil discards them.
	Logger *slog.Logger
}

// Checkpointer writes signed checkpoints of one log and anchors them. It is safe for
// concurrent use, and several processes may run one over the same database: checkpoints are
// written in IMMEDIATE transactions.
type Checkpointer struct {
	db       *store.DB
	opts     CheckpointerOptions
	verifier note.Verifier
	origin   string
}

// NewCheckpointer returns a checkpointer of the log in db. The signer and verifier key MUST
// be a pair.
func NewCheckpointer(db *store.DB, opts CheckpointerOptions) (*Checkpointer, error) {
	if opts.Signer == nil || opts.LogName == "" {
		return nil, errors.New("new checkpointer: a signer and a log name are required")
	}
	v, err := note.NewVerifier(strings.TrimSpace(opts.VerifierKey))
	if err != nil {
		return nil, fmt.Errorf("new checkpointer: audit verifier key: %v", err)
	}
	if v.Name() != opts.Signer.Name() || v.KeyHash() != opts.Signer.KeyHash() {
		return nil, fmt.Errorf("new checkpointer: audit.pub (%s) is not the public key of audit.key (%s)", v.Name(), opts.Signer.Name())
	}
	opts.VerifierKey = strings.TrimSpace(opts.VerifierKey)
	if opts.Every <= 0 {
		opts.Every = DefaultCheckpointEvery
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultCheckpointInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Checkpointer{db: db, opts: opts, verifier: v, origin: verify.Origin(v.Name(), opts.LogName)}, nil
}

// Origin is the log's checkpoint origin, "agora/<instance-hex>/<log>".
func (c *Checkpointer) Origin() string { return c.origin }

// Key is the log's public verifier key.
func (c *Checkpointer) Key() string { return c.opts.VerifierKey }

// LatestCheckpoint returns the largest stored checkpoint, or nil when there is none.
func LatestCheckpoint(ctx context.Context, q Querier) (*StoredCheckpoint, error) {
	return scanCheckpoint(q.QueryRowContext(ctx, `SELECT size, root, note, at FROM audit_checkpoints ORDER BY size DESC LIMIT 1`))
}

func scanCheckpoint(row *sql.Row) (*StoredCheckpoint, error) {
	var sc StoredCheckpoint
	var size int64
	var at string
	err := row.Scan(&size, &sc.Hash, &sc.Note, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read audit checkpoint: %w", err)
	}
	sc.Size = uint64(size)
	if sc.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return nil, fmt.Errorf("read audit checkpoint %d: time %q: %w", size, at, ErrTampered)
	}
	return &sc, nil
}

// write signs a checkpoint of the whole log, unless the latest one already covers it, after
// checking the latest one is a prefix of the log. It reports whether it wrote one.
func (c *Checkpointer) write(ctx context.Context) (*StoredCheckpoint, bool, error) {
	var out *StoredCheckpoint
	var created bool
	err := c.db.Tx(ctx, func(tx *sql.Tx) error {
		created = false
		r, err := loadTree(ctx, tx)
		if err != nil {
			return err
		}
		size, root := r.End(), rootOf(r)
		prev, err := LatestCheckpoint(ctx, tx)
		if err != nil {
			return err
		}
		if prev != nil {
			if _, err := c.checkPrefix(ctx, tx, "database", prev.Note, size, root); err != nil {
				return err
			}
			if prev.Size == size {
				out = prev
				return nil
			}
		}
		body := verify.Checkpoint{Origin: c.origin, Size: size, Hash: root}
		signed, err := verify.SignCheckpoint(body, c.opts.Signer)
		if err != nil {
			return err
		}
		at := c.opts.Now().UTC()
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_checkpoints(size, root, note, at) VALUES (?, ?, ?, ?)`,
			int64(size), root, signed, at.Format(time.RFC3339Nano)); err != nil {
			return fmt.Errorf("store audit checkpoint %d: %w", size, err)
		}
		out, created = &StoredCheckpoint{Checkpoint: body, Note: signed, At: at}, true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("write audit checkpoint: %w", err)
	}
	return out, created, nil
}

// checkPrefix checks that the signed checkpoint earlier, held by where, verifies and is a
// prefix of the log of size leaves with the given root.
func (c *Checkpointer) checkPrefix(ctx context.Context, q Querier, where string, earlier []byte, size uint64, root []byte) (verify.Checkpoint, error) {
	prev, err := verify.OpenCheckpoint(earlier, c.verifier, c.origin)
	if err != nil {
		return prev, fmt.Errorf("checkpoint held by %s: %v: %w", where, err, ErrTampered)
	}
	bad := &InconsistencyError{Where: where, Earlier: prev, Size: size, Root: root}
	switch {
	case prev.Size > size:
		bad.Reason = "the checkpoint is larger than the log: the log was truncated or rolled back"
		return prev, bad
	case prev.Size == size:
		if !bytes.Equal(prev.Hash, root) {
			bad.Reason = "same size, different root: the log was rewritten"
			return prev, bad
		}
		return prev, nil
	}
	p, err := ConsistencyProof(ctx, q, prev.Size, size)
	if err != nil {
		return prev, err
	}
	if err := proof.VerifyConsistency(hasher, prev.Size, size, p, prev.Hash, root); err != nil {
		bad.Reason = "the checkpoint is not a prefix of the log: the log was rewritten (" + err.Error() + ")"
		return prev, bad
	}
	return prev, nil
}
