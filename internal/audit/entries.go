package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// Record is one entry as `agora audit log` shows it, decoded from the bytes that were hashed.
type Record struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

// ListOptions filters [List].
type ListOptions struct {
	// Since keeps entries stamped at or after it; zero keeps all.
	Since time.Time
	// Kind keeps entries of that kind, or of a family with a pattern such as "catalog.*".
	Kind string
	// Limit keeps the last Limit matching entries; 0 keeps all.
	Limit int
	// Subject keeps entries about that subject only ("dispatch/ID", "run/ID"); "" keeps all.
	Subject string
}

// List returns the matching entries in sequence order. Each is decoded from its canonical
// bytes; an entry that does not decode is an [ErrTampered] error. With a Limit, the log is
// read from its newest entry back and no further than the Limit-th match, so the last few
// entries of a log of millions cost what they are.
func List(ctx context.Context, q Querier, opts ListOptions) ([]Record, error) {
	query, args := listQuery(opts)
	newestFirst := opts.Limit > 0
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, fmt.Errorf("list audit log: %w", err)
		}
		f, err := verify.DecodeEntry(body)
		if err != nil {
			return nil, fmt.Errorf("list audit log: entry %d: %v: %w", seq, err, ErrTampered)
		}
		if opts.Kind != "" && !verify.KindMatches(opts.Kind, f.Kind) || f.Time.Before(opts.Since) {
			continue
		}
		out = append(out, Record{Seq: f.Seq, Time: f.Time, Actor: f.Actor, Kind: f.Kind, Subject: f.Subject, Details: f.Details})
		if newestFirst && len(out) == opts.Limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	if newestFirst {
		slices.Reverse(out)
	}
	return out, nil
}

// listQuery is [List]'s statement for opts: what it narrows in SQL (the rest is checked
// on each decoded entry).
func listQuery(opts ListOptions) (string, []any) {
	query := `SELECT seq, entry FROM audit_entries WHERE 1 = 1`
	var args []any
	if !opts.Since.IsZero() {
		// at sorts correctly only to the second (see firstIndex); compare exactly below.
		query += ` AND at >= ?`
		args = append(args, opts.Since.UTC().Format("2006-01-02T15:04:05"))
	}
	if opts.Kind != "" && !isPattern(opts.Kind) {
		query += ` AND kind = ?`
		args = append(args, opts.Kind)
	}
	if opts.Subject != "" {
		query += ` AND ` + subjectIs
		args = append(args, opts.Subject, opts.Subject)
	}
	if opts.Limit > 0 {
		query += ` ORDER BY seq DESC`
	} else {
		query += ` ORDER BY seq`
	}
	return query, args
}

func isPattern(kind string) bool { return len(kind) > 1 && kind[len(kind)-1] == '*' }
