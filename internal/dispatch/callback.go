package dispatch

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/store"
)

// Callback headers. The signature is HMAC-SHA256 over "<id>.<timestamp>.<body>" under the
// instance's callback key, so a receiver can check both origin and freshness.
const (
	HeaderSignature = "X-Agora-Signature"
	HeaderID        = "X-Agora-Delivery"
	HeaderTimestamp = "X-Agora-Timestamp"
)

// Delivery limits.
const (
	callbackTimeout     = 10 * time.Second
	callbackMaxAttempts = 12
	callbackMaxBackoff  = 10 * time.Minute
	callbackBaseBackoff = time.Second
)

// enqueueCallback stores the event in the outbox in the caller's transaction: an event that
// committed is never lost for its callback, even if agora dies before delivering it.
func enqueueCallback(ctx context.Context, tx *sql.Tx, r *Record, seq int, kind string, at time.Time, data map[string]any) error {
	event := map[string]any{
		"dispatch_id": r.ID, "seq": seq, "kind": kind, "at": ts(at), "data": data,
	}
	if r.Learn {
		// Every event of a learn dispatch says so (docs/learn.md): a receiver that merges or
		// deploys on "finished" must not take a learn dispatch's patch for enforced work.
		event["learn"] = true
	}
	body, err := json.Marshal(event)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO callback_outbox(id, dispatch_id, url, body, next_at) VALUES (?, ?, ?, ?, ?)`,
		fmt.Sprintf("%s-%04d", r.ID, seq), r.ID, r.CallbackURL, body, ts(at))
	return err
}

// Sign returns the X-Agora-Signature value for a delivery.
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte("."))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Courier delivers the callback outbox through the egress dialer.
type Courier struct {
	db     queryExecer
	key    []byte
	client *http.Client
	dialer *egress.Dialer
	now    func() time.Time
}

type queryExecer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// NewCourier returns a courier that signs with key and sends through dialer.
func NewCourier(db *sql.DB, key []byte, dialer *egress.Dialer, now func() time.Time) *Courier {
	if now == nil {
		now = time.Now
	}
	return &Courier{db: db, key: key, client: dialer.Client(callbackTimeout), dialer: dialer, now: now}
}

type outboxRow struct {
	id, dispatchID, url, nextAt string
	body                        []byte
	attempts                    int
}

// Flush tries every due undelivered callback once and returns how many were delivered and how
// many remain. Events of one dispatch are delivered in order: while an earlier one is
// undelivered, later ones wait. Failures are recorded with a backoff (full jitter).
func (c *Courier) Flush(ctx context.Context, dispatchID string) (delivered, pending int, err error) {
	q := `SELECT id, dispatch_id, url, next_at, body, attempts FROM callback_outbox WHERE delivered_at = '' AND attempts < ?`
	args := []any{callbackMaxAttempts}
	if dispatchID != "" {
		q += ` AND dispatch_id = ?`
		args = append(args, dispatchID)
	}
	rows, err := c.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return 0, 0, err
	}
	var due []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.id, &r.dispatchID, &r.url, &r.nextAt, &r.body, &r.attempts); err != nil {
			rows.Close()
			return 0, 0, err
		}
		due = append(due, r)
	}
	rows.Close()
	now := ts(c.now())
	blocked := map[string]bool{}
	for _, r := range due {
		if blocked[r.dispatchID] || r.nextAt > now {
			blocked[r.dispatchID] = true
			pending++
			continue
		}
		// The outbox is written here outside store.Tx (autocommit), so the leader fence is
		// asked by hand: a supervisor whose serve lost its lease (it recorded the
		// end under the fence, then delivers) or a fenced serve sends nothing more and marks
		// nothing; the new leader delivers.
		if err := store.CheckFence(); err != nil {
			return delivered, pending + 1, fmt.Errorf("callbacks: %w", err)
		}
		if sendErr := c.send(ctx, r); sendErr != nil {
			backoff := min(callbackBaseBackoff<<min(r.attempts, 20), callbackMaxBackoff)
			next := c.now().Add(time.Duration(rand.Int64N(int64(backoff)) + 1))
			if _, err := c.mark(ctx, `UPDATE callback_outbox SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?`,
				ts(next), truncateErr(sendErr), r.id); err != nil {
				return delivered, 0, err
			}
			pending++
			blocked[r.dispatchID] = true
			continue
		}
		if _, err := c.mark(ctx, `UPDATE callback_outbox SET attempts = attempts + 1, delivered_at = ?, last_error = '' WHERE id = ?`,
			ts(c.now()), r.id); err != nil {
			return delivered, 0, err
		}
		delivered++
	}
	return delivered, pending, nil
}

// mark writes an outbox row's delivery state, unless the leader fence closed meanwhile (see
// Flush): a sent event left unmarked is sent again by the leader, as after a crash.
func (c *Courier) mark(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := store.CheckFence(); err != nil {
		return nil, fmt.Errorf("callbacks: %w", err)
	}
	return c.db.ExecContext(ctx, query, args...)
}

func (c *Courier) send(ctx context.Context, r outboxRow) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return fmt.Errorf("bad callback URL")
	}
	if err := c.dialer.CheckURL(req.URL); err != nil {
		return err
	}
	stamp := strconv.FormatInt(c.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderID, r.id)
	req.Header.Set(HeaderTimestamp, stamp)
	req.Header.Set(HeaderSignature, Sign(c.key, r.id, stamp, r.body))
	resp, err := c.client.Do(req)
	if err != nil {
		return egress.RedactError(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("callback answered %s", resp.Status)
	}
	return nil
}

func truncateErr(err error) string {
	s := err.Error()
	s = s[:min(len(s), 300)]
	return s
}
