package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// ErrNoEntries is returned by [Checkpointer.Export] when the selection matches no checkpointed
// entry.
var ErrNoEntries = errors.New("no audit entries selected")

// Selection picks the entries of an export.
type Selection struct {
	// FromIndex is the first index considered.
	FromIndex uint64
	// Since, when set, moves FromIndex up to the first entry stamped at or after it.
	Since time.Time
	// Kind, when set, keeps only entries of that kind, or with a prefix pattern such as
	// "catalog.*", of that family.
	Kind string
	// Subjects, when set, keeps only entries whose subject is one of them or lies below one
	// ("run/R" also selects "run/R/task/T").
	Subjects []string
	// Run, when set, names the orchestrator run this export is a part of; it is signed with
	// the selection, so a verifier can tell a part exported for another run.
	Run string
}

// Export builds a bundle of the selected entries up to the latest checkpoint (entries after
// it are left out: call [Checkpointer.Checkpoint] first to include them). Each entry carries
// its inclusion proof against the earliest checkpoint that covers every selected entry, so a
// bundle of old entries keeps pointing at the checkpoint that first sealed them; the bundle
// carries the latest anchored checkpoint, the consistency proof between the two and the
// anchors' evidence. The selection and the list of included indexes are signed with the
// log's key ([verify.SignSelection]), so a bundle with an entry removed no longer verifies.
// Manifests the caller adds afterwards are not signed: they are bound to entries instead.
func (c *Checkpointer) Export(ctx context.Context, sel Selection) (*verify.Bundle, error) {
	q := c.db.SQL()
	latest, err := LatestCheckpoint(ctx, q)
	if err != nil {
		return nil, err
	}
	if latest == nil {
		return nil, fmt.Errorf("export audit log: %w: no checkpoint yet (run agora audit checkpoint)", ErrNoEntries)
	}
	from, err := firstIndex(ctx, q, sel)
	if err != nil {
		return nil, err
	}
	var entries []verify.Entry
	if len(sel.Subjects) > 0 {
		entries, err = selectSubjects(ctx, q, from, latest.Size, sel.Kind, sel.Subjects)
	} else {
		entries, err = selectEntries(ctx, q, from, latest.Size, sel.Kind)
	}
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("export audit log: %w below checkpoint %d", ErrNoEntries, latest.Size)
	}
	last := entries[len(entries)-1].Index
	anchored, err := latestAnchored(ctx, q)
	if err != nil {
		return nil, err
	}
	proven, err := scanCheckpoint(q.QueryRowContext(ctx,
		`SELECT size, root, note, at FROM audit_checkpoints WHERE size > ? ORDER BY size LIMIT 1`, int64(last)))
	if err != nil {
		return nil, err
	}
	indexes := make([]uint64, len(entries))
	for i, e := range entries {
		indexes[i] = e.Index
	}
	proofs, err := inclusionProofs(ctx, q, indexes, proven.Size)
	if err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	for i := range entries {
		entries[i].InclusionProof = proofs[i]
	}
	b := &verify.Bundle{
		Format: verify.Format,
		Origin: c.origin,
		Key:    c.opts.VerifierKey,
		Selection: verify.Selection{FromIndex: from, Kind: sel.Kind, Count: len(entries), Subjects: sel.Subjects,
			EndIndex: latest.Size, Run: sel.Run},
		Checkpoint: proven.Note,
		Entries:    entries,
		Manifests:  []verify.Manifest{},
	}
	if b.Purged, err = verify.PurgedOf(entries); err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	if b.PurgedRuns, err = verify.PurgedRunsOf(entries); err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	if err := verify.SignSelection(b, c.opts.Signer); err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	if anchored != nil {
		if b.Anchored, err = anchoredPart(ctx, q, proven, anchored); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func firstIndex(ctx context.Context, q Querier, sel Selection) (uint64, error) {
	if sel.Since.IsZero() {
		return sel.FromIndex, nil
	}
	// at is RFC 3339 with trimmed fractions, which sorts correctly only to the second: narrow
	// in SQL by the second, then compare exactly.
	rows, err := q.QueryContext(ctx, `SELECT seq, at FROM audit_entries WHERE seq >= ? AND at >= ? ORDER BY seq`,
		int64(sel.FromIndex), sel.Since.UTC().Format("2006-01-02T15:04:05"))
	if err != nil {
		return 0, fmt.Errorf("export audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var at string
		if err := rows.Scan(&seq, &at); err != nil {
			return 0, fmt.Errorf("export audit log: %w", err)
		}
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil && !t.Before(sel.Since) {
			return uint64(seq), nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("export audit log: %w", err)
	}
	return 0, fmt.Errorf("export audit log: %w since %s", ErrNoEntries, sel.Since.UTC().Format(time.RFC3339))
}

func selectEntries(ctx context.Context, q Querier, from, end uint64, kind string) ([]verify.Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, entry, leaf_hash FROM audit_entries WHERE seq >= ? AND seq < ? ORDER BY seq`,
		int64(from), int64(end))
	if err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	defer rows.Close()
	entries := []verify.Entry{}
	for rows.Next() {
		var seq int64
		var k string
		var e verify.Entry
		if err := rows.Scan(&seq, &k, &e.Entry, &e.LeafHash); err != nil {
			return nil, fmt.Errorf("export audit log: %w", err)
		}
		if kind != "" && !verify.KindMatches(kind, k) {
			continue
		}
		e.Index = uint64(seq)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	return entries, nil
}

// latestAnchored returns the largest checkpoint at least one anchor accepted, or nil.
func latestAnchored(ctx context.Context, q Querier) (*StoredCheckpoint, error) {
	return scanCheckpoint(q.QueryRowContext(ctx, `SELECT size, root, note, at FROM audit_checkpoints
		WHERE size = (SELECT MAX(size) FROM audit_anchors WHERE evidence IS NOT NULL)`))
}

func anchoredPart(ctx context.Context, q Querier, proven, anchored *StoredCheckpoint) (*verify.Anchored, error) {
	small, large := proven.Size, anchored.Size
	if small > large {
		small, large = large, small
	}
	p, err := ConsistencyProof(ctx, q, small, large)
	if err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	a := &verify.Anchored{Checkpoint: anchored.Note, ConsistencyProof: p, Evidence: []verify.Evidence{}}
	rows, err := q.QueryContext(ctx, `SELECT evidence FROM audit_anchors WHERE size = ? AND evidence IS NOT NULL ORDER BY id`, int64(anchored.Size))
	if err != nil {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("export audit log: %w", err)
		}
		var ev verify.Evidence
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("export audit log: anchor evidence for checkpoint %d: %v: %w", anchored.Size, err, ErrTampered)
		}
		a.Evidence = append(a.Evidence, ev)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("export audit log: %w", err)
	}
	return a, nil
}

// selectSubjectSQL reads one subject's entries (and those below it) in [from, end).
const selectSubjectSQL = `SELECT seq, kind, entry, leaf_hash FROM audit_entries WHERE ` + UnderSubject + ` AND seq >= ? AND seq < ?`

// selectSubjects reads the entries of the given subjects (and those below them) in index
// order, through the subject index (orch.db's: its [SubjectKey] index): never a scan of the
// whole log.
func selectSubjects(ctx context.Context, q Querier, from, end uint64, kind string, subjects []string) ([]verify.Entry, error) {
	seen := map[int64]bool{}
	entries := []verify.Entry{}
	for _, s := range subjects {
		rows, err := q.QueryContext(ctx, selectSubjectSQL, append(UnderSubjectArgs(s), int64(from), int64(end))...)
		if err != nil {
			return nil, fmt.Errorf("export audit log: %w", err)
		}
		for rows.Next() {
			var seq int64
			var k string
			var e verify.Entry
			if err := rows.Scan(&seq, &k, &e.Entry, &e.LeafHash); err != nil {
				rows.Close()
				return nil, fmt.Errorf("export audit log: %w", err)
			}
			if seen[seq] || kind != "" && !verify.KindMatches(kind, k) {
				continue
			}
			seen[seq] = true
			e.Index = uint64(seq)
			entries = append(entries, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("export audit log: %w", err)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Index < entries[j].Index })
	return entries, nil
}
