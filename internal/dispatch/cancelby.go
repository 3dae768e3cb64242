package dispatch

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// CancelBy is [Dispatcher.Cancel] on behalf of actor, who is recorded in the audit log as
// asking, in the same transaction that raises the cancel flag. A dispatch that has already
// ended is returned unchanged and nothing is recorded.
func (d *Dispatcher) CancelBy(ctx context.Context, id, actor string) (*Record, error) {
	if actor == "" || actor == SystemActor {
		return nil, fmt.Errorf("cancel dispatch %s: the actor must be a person or program, not %q", id, actor)
	}
	if err := d.Records.requestCancelBy(ctx, id, actor); err != nil {
		return nil, err
	}
	return d.Cancel(ctx, id)
}

func (s *Records) requestCancelBy(ctx context.Context, id, actor string) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		r, err := getRecord(ctx, s.prepared(tx), id)
		if err != nil {
			return err
		}
		if lifecycle.DispatchEnded(r.State) || r.cancelRequested {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE dispatches SET cancel_requested = 1 WHERE id = ?`, id); err != nil {
			return err
		}
		_, err = s.log.Append(ctx, tx, audit.Entry{Actor: actor, Kind: entry.DispatchCancelRequested, Subject: entry.Dispatch(id),
			Details: map[string]any{"dispatch": id, entry.KeyBy: actor, entry.KeyState: r.State}})
		return err
	})
}
