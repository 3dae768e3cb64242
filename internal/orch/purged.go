package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/errclass"
)

// runNotFound is the error for run ref, which orch.db's runs table does not hold. When
// orch.db's log records that retention purged a run of that id (a retention.run_purged entry,
// found through the log's subject key index: one indexed read), the error says so, when and why, and
// names the entry; otherwise it is the plain "not found". Either way it matches ErrNotFound.
// A run asked for by name is not looked up: names are not subjects, and nothing indexes them
// in the log.
func runNotFound(ctx context.Context, db *sql.DB, ref string) error {
	nf := &errclass.NotFoundError{Kind: "run", ID: ref, Of: ErrNotFound}
	if db == nil || ref == "" {
		return nf
	}
	var seq int64
	var body []byte
	err := db.QueryRowContext(ctx, `SELECT seq, entry FROM audit_entries WHERE subject = ? AND `+audit.SubjectKey+` = substr(?, 1, 30)
		AND kind = ? ORDER BY seq DESC LIMIT 1`, entry.Run(ref), entry.Run(ref), entry.RetentionRunPurged).Scan(&seq, &body)
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			nf.Note = fmt.Sprintf("reading whether retention purged it failed: %v", err)
		}
		return nf
	}
	var e struct {
		Time    string `json:"time"`
		Actor   string `json:"actor"`
		Details struct {
			Why string `json:"why"`
		} `json:"details"`
	}
	// The entry is agora's own, committed with the purge; one that does not decode still
	// says the run was purged.
	_ = json.Unmarshal(body, &e)
	nf.Note = fmt.Sprintf("purged by retention at %s by %s: %s; orch.db audit entry %d", e.Time, e.Actor, e.Details.Why, seq)
	return nf
}
