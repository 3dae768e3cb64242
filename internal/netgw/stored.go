package netgw

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
)

// A session's files (session.json, its sockets, its upload marks) live on the host's disk,
// AGORA_HOME/gateway/sessions. That disk is one replica's own: two serve replicas on a Lease
// each have a volume, and only agora.db and orch.db are replicated to object storage. So
// what the gateway needs to accept a session is also kept in agora.db, in gateway_sessions:
// the token's SHA-256 (never the token) and the session record (mounts with their host
// paths, the count of files, the upload cap: nothing secret), so the replica that takes over
// knows each in-flight Job's session and can take it back (Reattach), and a session that ended
// on the old leader (its row deleted, with the dispatch's end in one transaction: dispatch's
// triggers) is not revived.
//
// With [Registry.Sessions] set, the row is the authority on whether a session stands:
//
//   - no row, and a local session.json written with one (Stored): revoked; 401.
//   - no row, and a local session.json written without one (an agora before this, or a
//     registry without a store): the local file decides, as before.
//   - a row whose token hash is not the token's: 403.
//   - a row, and no local session.json (or one of another token): the session is being taken
//     back by the replica that took over (or re-exported); 503, which the worker retries.
//   - a row and a local session.json of the same token: served.

// SessionStore keeps the gateway's sessions in a database that outlives this host's disk.
type SessionStore interface {
	// PutSession records the session of dispatch id (token hash sum, record rec as JSON),
	// replacing the dispatch's previous one. It fails for a dispatch that is not live (the
	// database's own rule, see dispatch's triggers).
	PutSession(ctx context.Context, id, sum string, rec []byte) error
	// DeleteSession removes dispatch id's session when its token hash is sum ("" whatever it
	// is); none is no error.
	DeleteSession(ctx context.Context, id, sum string) error
	// Session returns dispatch id's token hash and record, or [ErrNoSession].
	Session(ctx context.Context, id string) (sum string, rec []byte, err error)
}

// SessionMigrations creates gateway_sessions in agora.db (internal/agoradb composes it after
// the dispatch tables; dispatch's own step ties each row to its dispatch's life).
var SessionMigrations = []store.Migration{{
	Name: "gateway sessions",
	SQL: `
-- One row per dispatch whose worker holds a gateway token: the token's SHA-256 (hex; the token
-- itself is never stored) and the session record (JSON: mounts with their host paths, files,
-- upload cap; nothing secret), so that a replica restored from object storage accepts the
-- in-flight Jobs' tokens (netgw/stored.go).
CREATE TABLE gateway_sessions (
  dispatch_id  TEXT PRIMARY KEY,
  token_sha256 TEXT NOT NULL CHECK (length(token_sha256) = 64),
  record       TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);
`,
}}

// DBSessions is a [SessionStore] over agora.db's gateway_sessions. Its writes are the
// process's commits: fenced like every other (store.SetFence), so a replica that lost the
// Lease stores and deletes nothing.
type DBSessions struct {
	DB  *store.DB
	Now func() time.Time // nil: time.Now
}

var _ SessionStore = (*DBSessions)(nil)

func (d *DBSessions) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *DBSessions) PutSession(ctx context.Context, id, sum string, rec []byte) error {
	err := d.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO gateway_sessions (dispatch_id, token_sha256, record, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (dispatch_id) DO UPDATE SET token_sha256 = excluded.token_sha256, record = excluded.record, created_at = excluded.created_at`,
			id, sum, string(rec), d.now().UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("store gateway session %q: %w", id, err)
	}
	return nil
}

func (d *DBSessions) DeleteSession(ctx context.Context, id, sum string) error {
	err := d.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM gateway_sessions WHERE dispatch_id = ? AND (? = '' OR token_sha256 = ?)`, id, sum, sum)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete gateway session %q: %w", id, err)
	}
	return nil
}

func (d *DBSessions) Session(ctx context.Context, id string) (string, []byte, error) {
	var sum, rec string
	err := d.DB.SQL().QueryRowContext(ctx, `SELECT token_sha256, record FROM gateway_sessions WHERE dispatch_id = ?`, id).Scan(&sum, &rec)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, ErrNoSession
	}
	if err != nil {
		return "", nil, fmt.Errorf("read gateway session %q: %w", id, err)
	}
	return sum, []byte(rec), nil
}

// storedRecord is dispatch id's session as the store holds it; [ErrNoSession] when none.
// A row whose record does not parse, names another dispatch or another token's hash is an
// error (fail closed: refused, never served from).
func (g *Registry) storedRecord(ctx context.Context, id string) (*record, error) {
	sum, b, err := g.Sessions.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(b) > maxSessionFile {
		return nil, fmt.Errorf("stored gateway session %q: over %d bytes", id, maxSessionFile)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("stored gateway session %q: %w", id, err)
	}
	if r.Dispatch != id || r.TokenSHA256 != sum {
		return nil, fmt.Errorf("stored gateway session %q: it names dispatch %q and another token", id, r.Dispatch)
	}
	return &r, nil
}

// putStored records rec in the store, when there is one.
func (g *Registry) putStored(ctx context.Context, rec *record) error {
	if g.Sessions == nil {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return g.Sessions.PutSession(ctx, rec.Dispatch, rec.TokenSHA256, b)
}

// deleteStored removes dispatch id's stored session of token hash sum ("" any), when there is
// a store.
func (g *Registry) deleteStored(ctx context.Context, id, sum string) error {
	if g.Sessions == nil {
		return nil
	}
	return g.Sessions.DeleteSession(ctx, id, sum)
}

// errNotHere: the store holds the dispatch's session, and this host's sessions directory does
// not (or holds another token's): the session was exported by another replica before this one
// took over, and has not been taken back here yet (Reattach), or it is being exported again.
var errNotHere = errors.New("the gateway session is stored but not taken back on this host yet")

// standing is dispatch id's session as it stands now: the local record, decided by the store
// when there is one (see the comment at the top of this file). With [errNotHere] it returns
// the stored record, whose token hash tells a worker that must wait (503) from one whose token
// is not the dispatch's (403).
func (g *Registry) standing(ctx context.Context, id string) (*record, error) {
	local, lerr := loadRecord(g.Dir, id)
	if g.Sessions == nil {
		return local, lerr
	}
	if lerr != nil && !errors.Is(lerr, ErrNoSession) {
		return nil, lerr
	}
	stored, serr := g.storedRecord(ctx, id)
	switch {
	case errors.Is(serr, ErrNoSession):
		if lerr == nil && local.Stored {
			return nil, ErrNoSession // its row went: revoked, or its dispatch ended
		}
		return local, lerr // a session exported without the store: its file decides
	case serr != nil:
		return nil, serr
	case lerr != nil, local.TokenSHA256 != stored.TokenSHA256, local.Epoch != stored.Epoch:
		return stored, errNotHere
	}
	return local, nil
}

// restore makes the stored session of spec.ID this host's (the replica that exported it is
// gone: a takeover), under the dispatch's lock: the session directory, the kept uploads and
// the row's raised epoch. Reattach writes session.json last, once everything it serves is
// open: until then the token is answered 503. Nothing the row names on the other replica's
// disk is served: every mount's content comes from spec, the binds this host's supervisor
// made for the dispatch again (the same AGORA_HOME paths, made from the same accepted
// dispatch: docs/adr/0008-a-takeover-serves-the-stage-again.md), so a pod killed with its
// leader while it fetched fetches it all again here.
//
//   - A Fetch mount is served from spec's bind at the same destination, of the same kind (a
//     file, or a directory without sockets). Without one it stays a Fetch mount with no
//     source, which the gateway refuses (410): a worker never starts on a stage it fetched
//     empty.
//   - A result mount takes its upload into spec's result bind at its destination, whose path
//     must be the row's: the row does not get to choose where an upload goes.
//   - A mount that reaches host sockets (a model gateway or egress proxy lived in that
//     replica's supervisor) refuses the whole session.
//   - spec.Files are served again when they are as many as the row's (the secrets object,
//     unsealed again by this supervisor): a worker that had not read them yet reads them here.
//   - A result mount's kept upload (kept.go) is put in this host's out directory, marked
//     stored: the worker that uploaded it to the replica that died is answered as if here.
func (g *Registry) restore(ctx context.Context, spec compute.Spec, stored *record) (*record, error) {
	if stored.Dispatch != spec.ID {
		return nil, fmt.Errorf("take back gateway session %q: it names dispatch %q", spec.ID, stored.Dispatch)
	}
	host, err := exportMounts(spec.Binds)
	if err != nil {
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	rec := *stored
	rec.Mounts = nil
	results := map[string]bool{}
	for _, m := range stored.Mounts {
		if !remote.ValidMountName(m.Name) {
			// A name is a route's and a mark's file name (put-NAME): never a path.
			return nil, fmt.Errorf("take back gateway session %q: a mount is named %q", spec.ID, m.Name)
		}
		if len(m.Sockets) > 0 {
			return nil, fmt.Errorf("take back gateway session %q: mount %q reaches host sockets that lived on the replica that exported it", spec.ID, m.Name)
		}
		h := hostMount(host, m.Dst)
		if !m.Result {
			m.Src = ""
			if m.Fetch && h != nil && h.Name == m.Name && h.Fetch && h.File == m.File && !h.Result && len(h.Sockets) == 0 {
				m.Src = h.Src // made again here from the same dispatch
			}
			rec.Mounts = append(rec.Mounts, m)
			continue
		}
		if h == nil || !h.Result || h.Src != m.Src || !filepath.IsAbs(m.Src) || filepath.Clean(m.Src) != m.Src || m.File || results[m.Src] {
			return nil, fmt.Errorf("take back gateway session %q: its result mount %q (%s) is not the one this dispatch binds there", spec.ID, m.Name, m.Dst)
		}
		results[m.Src] = true // one upload per out directory: no second mount over it
		m.Fetch = false
		rec.Mounts = append(rec.Mounts, m)
	}
	files := 0
	if stored.Files > 0 && len(spec.Files) == stored.Files {
		files = stored.Files
	}
	// The upload cap is the spec's (the target's disk), never the row's.
	rec.Files, rec.Stored, rec.Restored, rec.MaxUploadBytes = files, true, true, max(spec.Limits.Disk, 0)
	rec.Epoch = stored.Epoch + 1
	sd, err := sessionDir(g.Dir, spec.ID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	if err := os.RemoveAll(sd); err != nil {
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	if err := os.Mkdir(sd, 0o700); err != nil {
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	if err := g.restoreUploads(ctx, sd, &rec); err != nil {
		os.RemoveAll(sd)
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	// The row's epoch first: from now on a session.json of an older one (this replica's own,
	// from before another led) is not served (standing).
	row := *stored
	row.Epoch = rec.Epoch
	if err := g.putStored(ctx, &row); err != nil {
		os.RemoveAll(sd)
		return nil, fmt.Errorf("take back gateway session %q: %w", spec.ID, err)
	}
	return &rec, nil
}

// restoreUploads puts each result mount's kept upload (kept.go) into this host's out
// directory, marked stored in the session directory sd, as the gateway that kept it had it.
func (g *Registry) restoreUploads(ctx context.Context, sd string, rec *record) error {
	if g.Uploads == nil {
		return nil
	}
	for _, m := range rec.Mounts {
		if !m.Result {
			continue
		}
		sum, body, err := g.Uploads.KeptUpload(ctx, rec.Dispatch, m.Name)
		if errors.Is(err, ErrNoUpload) {
			continue
		}
		if err != nil {
			return err
		}
		removeStaging(m.Src)
		if _, err := extractUpload(bytes.NewReader(body), m.Src, uploadCaps{bytes: MaxUploadBytes, entries: MaxUploadEntries}); err != nil {
			return fmt.Errorf("the kept upload of mount %q: %w", m.Name, err)
		}
		if err := writeUploadMark(sd, m.Name, uploadMark{SHA256: sum, Size: int64(len(body))}); err != nil {
			return fmt.Errorf("the kept upload of mount %q: %w", m.Name, err)
		}
	}
	return nil
}

// hostMount is the mount of host (this host's binds as Export maps them) at destination dst.
func hostMount(host []mountRecord, dst string) *mountRecord {
	for i := range host {
		if host[i].Dst == dst {
			return &host[i]
		}
	}
	return nil
}
