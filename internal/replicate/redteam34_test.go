package replicate_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
)

// TestRedTeam34Lease_GenerationAfterSkewedClock is the attack of two leaders whose wall clocks
// disagree: the old leader's host runs an hour ahead, so its generation is named an hour in
// the future. The new leader takes over, restores, serves and ships its own generation; the
// next takeover must restore the new leader's state. Generations sort by the starting host's
// clock, so a new one named by its own clock alone sorted before the old leader's, and the
// next restore silently rolled everything back to the old leader's state.
func TestRedTeam34Lease_GenerationAfterSkewedClock(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 10)
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	old, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour, Now: ahead})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 10, 25) // the new leader's commits
	next, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agora.db")
	res, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != next.Status().Generation {
		t.Errorf("restored generation %s (the old leader's, named by a clock an hour ahead), want the newer leader's %s", res.Generation, next.Status().Generation)
	}
	wantRows(t, out, 25)
}
