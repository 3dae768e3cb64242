package netgw

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/store"
)

// A result mount's upload lands in the out directory on this host's disk, one replica's own
// volume. A worker that uploaded to a leader which then died has exited: its Job holds no
// result any more, and the replica that takes over would find none (the dispatch lost, its
// task run again). So, with [Registry.Uploads] set (a serve that replicates its home), the
// gateway answers an upload only once it is kept beyond this disk: its bytes in the blob store
// (blobs.s3, the bucket every replica reads), a row naming them in agora.db's
// gateway_uploads, and agora.db's replica holding that row. The replica that takes the
// session back (restore) extracts the kept upload into its own out directory and marks it
// stored, as if the worker had uploaded it there: the same bytes again get 204, others 409.
// The row goes with its session (a trigger), so a kept upload never outlives its dispatch.

// UploadStore keeps a result mount's upload where a replica that takes over finds it.
type UploadStore interface {
	// KeepUpload keeps body, the upload of dispatch id's mount under the session of token
	// hash session (its SHA-256 sum, hex), and returns once a replica restored from now on
	// holds it. It fails when that session no longer stands.
	KeepUpload(ctx context.Context, id, session, mount, sum string, body []byte) error
	// KeptUpload returns the upload kept for dispatch id's mount, checked against its sum;
	// [ErrNoUpload] when none is.
	KeptUpload(ctx context.Context, id, mount string) (sum string, body []byte, err error)
}

// ErrNoUpload: no upload of the mount is kept.
var ErrNoUpload = errors.New("no upload of the mount is kept")

// MaxKeptUpload caps an upload kept beyond this disk: the blob store's own cap on what it
// reads back. A larger upload (or one over keptLimit) is stored here only, and the gateway's
// log says so.
const MaxKeptUpload = 1 << 30

// UploadMigrations creates gateway_uploads in agora.db (internal/agoradb appends it after
// every earlier step).
var UploadMigrations = []store.Migration{{
	Name: "gateway kept uploads",
	SQL: `
-- One row per result mount whose upload the gateway kept beyond its host's disk: the blob
-- (its SHA-256, the blob store's name for it) and its length. It goes with its session.
CREATE TABLE gateway_uploads (
  dispatch_id TEXT NOT NULL,
  mount       TEXT NOT NULL,
  sha256      TEXT NOT NULL CHECK (length(sha256) = 64),
  size        INTEGER NOT NULL CHECK (size >= 0),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (dispatch_id, mount)
);

CREATE TRIGGER gateway_uploads_session_delete AFTER DELETE ON gateway_sessions
BEGIN DELETE FROM gateway_uploads WHERE dispatch_id = OLD.dispatch_id; END;

CREATE TRIGGER gateway_uploads_session_replaced AFTER UPDATE OF token_sha256 ON gateway_sessions
WHEN NEW.token_sha256 != OLD.token_sha256
BEGIN DELETE FROM gateway_uploads WHERE dispatch_id = OLD.dispatch_id; END;
`,
}}

// Blobs is the part of the blob store an [UploadStore] uses (blob.Store).
type Blobs interface {
	Put(b []byte) (digest.Digest, error)
	Get(d digest.Digest, maxSize int64) ([]byte, error)
}

// DBUploads is an [UploadStore] over the blob store and agora.db's gateway_uploads.
type DBUploads struct {
	DB    *store.DB
	Blobs Blobs
	// Replicated returns once agora.db's replica holds every commit made before since
	// (cli's wait on the replicator's status); nil: no wait.
	Replicated func(ctx context.Context, since time.Time) error
	Now        func() time.Time // nil: time.Now
}

var _ UploadStore = (*DBUploads)(nil)

func (u *DBUploads) now() time.Time {
	if u.Now != nil {
		return u.Now()
	}
	return time.Now()
}

func (u *DBUploads) KeepUpload(ctx context.Context, id, session, mount, sum string, body []byte) error {
	d, err := u.Blobs.Put(body)
	if err != nil {
		return fmt.Errorf("keep the upload of %s's mount %s: %w", id, mount, err)
	}
	if d.Hex() != sum {
		return fmt.Errorf("keep the upload of %s's mount %s: the blob store named it %s, want sha256:%s", id, mount, d, sum)
	}
	var n int64
	err = u.DB.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO gateway_uploads (dispatch_id, mount, sha256, size, created_at)
SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM gateway_sessions WHERE dispatch_id = ? AND token_sha256 = ?)
ON CONFLICT (dispatch_id, mount) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, created_at = excluded.created_at`,
			id, mount, sum, len(body), u.now().UnixMilli(), id, session)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("keep the upload of %s's mount %s: %w", id, mount, err)
	}
	if n == 0 {
		return fmt.Errorf("keep the upload of %s's mount %s: %w", id, mount, ErrNoSession)
	}
	if u.Replicated != nil {
		if err := u.Replicated(ctx, u.now()); err != nil {
			return fmt.Errorf("keep the upload of %s's mount %s: the replica does not hold it yet: %w", id, mount, err)
		}
	}
	return nil
}

func (u *DBUploads) KeptUpload(ctx context.Context, id, mount string) (string, []byte, error) {
	var sum string
	var size int64
	err := u.DB.SQL().QueryRowContext(ctx, `SELECT sha256, size FROM gateway_uploads WHERE dispatch_id = ? AND mount = ?`, id, mount).Scan(&sum, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, ErrNoUpload
	}
	if err != nil {
		return "", nil, fmt.Errorf("read the kept upload of %s's mount %s: %w", id, mount, err)
	}
	d, err := digest.Parse("sha256:" + sum)
	if err != nil || size < 0 || size > MaxKeptUpload {
		return "", nil, fmt.Errorf("the kept upload of %s's mount %s: its row names sha256:%q of %d bytes", id, mount, sum, size)
	}
	b, err := u.Blobs.Get(d, size)
	if err != nil {
		return "", nil, fmt.Errorf("read the kept upload of %s's mount %s: %w", id, mount, err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum || int64(len(b)) != size {
		return "", nil, fmt.Errorf("the kept upload of %s's mount %s is not the blob its row names", id, mount)
	}
	return sum, b, nil
}

// keptBody is an upload's bytes as they came, in a file of the session's directory, so that
// they can be kept once placed.
type keptBody struct {
	f     *os.File
	n     int64
	limit int64 // keptLimit
	over  bool  // past limit: not kept
	err   error // the first write's failure: the host's, which fails the keep
}

// keptFraming is what a kept upload may hold beyond its files' bytes per entry: a header, a
// PAX header and record for a long name, and a block's padding.
const keptFraming = 3072

// keptLimit is the most an upload under caps is teed with while it comes: its file bytes and
// the framing of as many entries as it may have, at most MaxKeptUpload. The extraction counts
// file bytes only; once it is placed, keep checks the body against the entries it really
// had, so a body inflated with metadata (PAX comments) is placed but not kept: it cannot
// make the bucket, or the leader's memory, hold more than the session's cap allows.
func keptLimit(caps uploadCaps) int64 {
	bytes, entries := caps.bytes, caps.entries
	if bytes <= 0 {
		bytes = MaxUploadBytes
	}
	if entries <= 0 {
		entries = MaxUploadEntries
	}
	return min(MaxKeptUpload, bytes+int64(entries+2)*keptFraming+maxTrailer)
}

func newKeptBody(sd, mount string, limit int64) (*keptBody, error) {
	f, err := os.CreateTemp(sd, "kept-"+mount+"-")
	if err != nil {
		return nil, fmt.Errorf("keep the upload: %w", err)
	}
	return &keptBody{f: f, limit: limit}, nil
}

// Write takes the bytes up to the limit and counts the rest. It never fails the upload's
// read: a failure to write here is the keep's.
func (k *keptBody) Write(p []byte) (int, error) {
	k.n += int64(len(p))
	if k.over = k.over || k.n > k.limit; k.over || k.err != nil {
		return len(p), nil
	}
	if _, err := k.f.Write(p); err != nil {
		k.err = err
	}
	return len(p), nil
}

func (k *keptBody) discard() {
	k.f.Close()
	os.Remove(k.f.Name())
}

// keep keeps the placed upload of m (its body in kb, mark its sum and length) beyond this
// host's disk. One over MaxKeptUpload is not kept, and the log says so.
func (s *Server) keep(ctx context.Context, rec *record, m *mountRecord, mark uploadMark, kb *keptBody, caps uploadCaps, entries int) error {
	if max := keptLimit(uploadCaps{bytes: caps.bytes, entries: entries}); kb.over || kb.n > max {
		s.logger().Warn("gateway upload: over the size a kept upload of its files and entries may have; on this replica's disk only",
			"dispatch_id", rec.Dispatch, "mount", m.Name, "bytes", kb.n, "max", max)
		return nil
	}
	if kb.err != nil {
		return fmt.Errorf("write the upload's bytes here: %w", kb.err)
	}
	b, err := os.ReadFile(kb.f.Name())
	if err != nil {
		return err
	}
	if int64(len(b)) != mark.Size {
		return fmt.Errorf("the kept body holds %d bytes, the upload %d", len(b), mark.Size)
	}
	return s.Registry.Uploads.KeepUpload(ctx, rec.Dispatch, rec.TokenSHA256, m.Name, mark.SHA256, b)
}
