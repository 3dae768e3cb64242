// Package view is the read side of agora's catalog as stored in agora.db: it lists, shows,
// resolves and reads the history of capabilities, subagents, env bundles and workspaces. It cannot
// change anything: deploy-time writes live in package provision, which the run-time side (the
// MCP server, the dispatcher) never imports. It never returns secret values: only sealed bytes,
// which need a key it does not have.
package view

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/store"
)

// NotFoundError reports an unknown name or version, with the names that do exist.
type NotFoundError struct {
	Kind   catalog.Kind
	Ref    string
	Known  []string
	Pinned bool // the name exists but not with the requested digest
}

func (e *NotFoundError) Error() string {
	if e.Pinned {
		return fmt.Sprintf("%s %q not found: no such version (see `agora %s history`)", e.Kind, e.Ref, string(e.Kind))
	}
	if len(e.Known) == 0 {
		return fmt.Sprintf("%s %q not found; no %s are registered", e.Kind, e.Ref, e.Kind.Plural())
	}
	return fmt.Sprintf("%s %q not found; known: %s", e.Kind, e.Ref, strings.Join(e.Known, ", "))
}

// ErrNotFound is matched by every [NotFoundError].
var ErrNotFound = errors.New("not found")

func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Class is errclass.NotFound: the CLI exits with its not-found code.
func (e *NotFoundError) Class() errclass.Class { return errclass.NotFound }

// Catalog reads the catalog. It has no method that changes anything; the MCP server and the
// dispatcher are handed a Catalog and nothing more.
type Catalog struct {
	db    *store.DB
	blobs *blob.Store
}

// New returns a read-only view of the catalog in db and blobs.
func New(db *store.DB, blobs *blob.Store) *Catalog {
	return &Catalog{db: db, blobs: blobs}
}

const versionColumns = `v.kind, v.name, v.digest, v.size, v.registered_at, v.registered_by, v.meta`

func scanVersion(row interface{ Scan(...any) error }) (catalog.Version, error) {
	var v catalog.Version
	var at, meta string
	if err := row.Scan(&v.Kind, &v.Name, &v.Digest, &v.Size, &at, &v.RegisteredBy, &meta); err != nil {
		return v, err
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return v, fmt.Errorf("catalog row %s %s: bad time %q", v.Kind, v.Name, at)
	}
	v.RegisteredAt = t
	if err := json.Unmarshal([]byte(meta), &v.Meta); err != nil {
		return v, fmt.Errorf("catalog row %s %s: bad metadata: %w", v.Kind, v.Name, err)
	}
	return v, nil
}

// List returns the latest version of every active (not retired) name of kind, sorted by name.
func (r *Catalog) List(ctx context.Context, kind catalog.Kind) ([]catalog.Version, error) {
	rows, err := r.db.SQL().QueryContext(ctx, `
SELECT `+versionColumns+` FROM catalog_heads h
JOIN catalog_versions v ON v.kind = h.kind AND v.name = h.name AND v.digest = h.digest
WHERE h.kind = ? AND h.retired = 0 ORDER BY h.name`, kind)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind.Plural(), err)
	}
	defer rows.Close()
	out := []catalog.Version{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Names returns the active names of kind, sorted.
func (r *Catalog) Names(ctx context.Context, kind catalog.Kind) ([]string, error) {
	rows, err := r.db.SQL().QueryContext(ctx, `SELECT name FROM catalog_heads WHERE kind = ? AND retired = 0 ORDER BY name`, kind)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind.Plural(), err)
	}
	defer rows.Close()
	names := []string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// Resolve finds the version ref names: "name" is the latest active version, "name@sha256:HEX"
// pins one (retired names can still be pinned, so old records stay readable).
func (r *Catalog) Resolve(ctx context.Context, kind catalog.Kind, ref string) (catalog.Version, error) {
	name, digest, err := catalog.ParseRef(kind, ref)
	if err != nil {
		return catalog.Version{}, err
	}
	var row *sql.Row
	if digest == "" {
		row = r.db.SQL().QueryRowContext(ctx, `
SELECT `+versionColumns+` FROM catalog_heads h
JOIN catalog_versions v ON v.kind = h.kind AND v.name = h.name AND v.digest = h.digest
WHERE h.kind = ? AND h.name = ? AND h.retired = 0`, kind, name)
	} else {
		row = r.db.SQL().QueryRowContext(ctx, `
SELECT `+versionColumns+` FROM catalog_versions v WHERE v.kind = ? AND v.name = ? AND v.digest = ?`, kind, name, digest)
	}
	v, err := scanVersion(row)
	if errors.Is(err, sql.ErrNoRows) {
		nf := &NotFoundError{Kind: kind, Ref: ref}
		if digest != "" {
			if _, err := r.Resolve(ctx, kind, name); err == nil {
				nf.Pinned = true
				return catalog.Version{}, nf
			}
		}
		nf.Known, _ = r.Names(ctx, kind)
		return catalog.Version{}, nf
	}
	if err != nil {
		return catalog.Version{}, fmt.Errorf("resolve %s %q: %w", kind, ref, err)
	}
	return v, nil
}

// History returns every registration and retirement of name, oldest first.
func (r *Catalog) History(ctx context.Context, kind catalog.Kind, name string) ([]catalog.Event, error) {
	if err := catalog.CheckName(kind, name); err != nil {
		return nil, err
	}
	rows, err := r.db.SQL().QueryContext(ctx, `
SELECT seq, action, COALESCE(digest, ''), at, actor FROM catalog_history
WHERE kind = ? AND name = ? ORDER BY seq`, kind, name)
	if err != nil {
		return nil, fmt.Errorf("history of %s %q: %w", kind, name, err)
	}
	defer rows.Close()
	out := []catalog.Event{}
	for rows.Next() {
		var e catalog.Event
		var at string
		if err := rows.Scan(&e.Seq, &e.Action, &e.Digest, &at, &e.Actor); err != nil {
			return nil, err
		}
		if e.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("history of %s %q: bad time %q", kind, name, at)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		known, _ := r.Names(ctx, kind)
		return nil, &NotFoundError{Kind: kind, Ref: name, Known: known}
	}
	return out, nil
}

// Head returns the current digest of name and whether it is retired, or ok=false when the name
// was never registered.
func (r *Catalog) Head(ctx context.Context, kind catalog.Kind, name string) (head digest.Digest, retired, ok bool, err error) {
	err = r.db.SQL().QueryRowContext(ctx, `SELECT digest, retired FROM catalog_heads WHERE kind = ? AND name = ?`, kind, name).
		Scan(&head, &retired)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, false, nil
	}
	if err != nil {
		return "", false, false, fmt.Errorf("look up %s %q: %w", kind, name, err)
	}
	return head, retired, true, nil
}

// Content returns the stored bytes of v, re-verified against its digest.
func (r *Catalog) Content(v catalog.Version) ([]byte, error) {
	b, err := r.blobs.Get(v.Digest, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", v.Kind, v.Ref(), err)
	}
	return b, nil
}

// Sealed returns the sealed (encrypted) bytes of a secret reference. Opening them needs the
// secret key, which a Catalog does not have.
func (r *Catalog) Sealed(ctx context.Context, ref string) ([]byte, error) {
	var b []byte
	err := r.db.SQL().QueryRowContext(ctx, `SELECT sealed FROM sealed_secrets WHERE ref = ?`, ref).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sealed secret %s not found", ref)
	}
	return b, err
}
