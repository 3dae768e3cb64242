// Package audit owns agora's append-only audit logs: one per database (agora.db, orch.db). An
// entry is RFC 8785 canonical JSON, hashed as an RFC 6962 leaf, and appended in the SAME
// transaction as the state change it records, so a change and its entry commit or vanish
// together.
//
// audit runs on the host side. Entries hold names, hashes and decisions: never secret values,
// tokens or raw tool arguments.
package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/store"
)

// Entry is what a caller records. Details MUST NOT contain secrets; put hashes of sensitive
// arguments instead.
type Entry struct {
	Actor   string         // OS user, CI actor, MCP client name, or dispatch id with role
	Kind    string         // catalog.*, dispatch.*, orch.*, tool.*, mcp.*
	Subject string         // what the entry is about: "capability/repo-tools", a dispatch id
	Details map[string]any // canonical-JSON-encodable values only (see [jcs.Marshal])
}

// Migrations creates the tables of one log. Every database that carries a log includes them.
var Migrations = []store.Migration{{
	Name: "audit log",
	SQL: `
CREATE TABLE audit_entries (
	seq       INTEGER PRIMARY KEY,  -- leaf index, from 0
	at        TEXT NOT NULL,        -- RFC 3339 UTC
	kind      TEXT NOT NULL,
	subject   TEXT NOT NULL,
	actor     TEXT NOT NULL,
	entry     BLOB NOT NULL,        -- the canonical JSON exactly as hashed
	leaf_hash BLOB NOT NULL         -- RFC 6962: SHA-256(0x00 || entry)
);
CREATE INDEX audit_entries_kind ON audit_entries(kind, seq);
CREATE INDEX audit_entries_at ON audit_entries(at);
`,
}}

// Log appends entries to the audit_entries table of one database.
type Log struct {
	now func() time.Time
}

// New returns a log that stamps entries with now (time.Now when nil).
func New(now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{now: now}
}

// LeafHash is the RFC 6962 hash of a leaf: SHA-256(0x00 || data).
func LeafHash(data []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil)
}

// Append records e inside tx and returns its sequence number. The caller's transaction MUST be
// the one that makes the change e describes.
func (l *Log) Append(ctx context.Context, tx *sql.Tx, e Entry) (int64, error) {
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM audit_entries`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	at := l.now().UTC().Format(time.RFC3339Nano)
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	body, err := jcs.Marshal(map[string]any{
		"seq":     seq,
		"time":    at,
		"actor":   e.Actor,
		"kind":    e.Kind,
		"subject": e.Subject,
		"details": details,
	})
	if err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		seq, at, e.Kind, e.Subject, e.Actor, body, LeafHash(body)); err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	return seq, nil
}
