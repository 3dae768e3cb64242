package replicate_test

import (
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// TestReplicate_Fenced: with the fence refusing (a serve that lost its leader lease), neither
// a sync nor the last sync of Close puts a segment, and the error is the fence's.
func TestReplicate_Fenced(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 50)
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	var shut atomic.Bool
	o := replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour,
		Fence: func() error {
			if shut.Load() {
				return fenced
			}
			return nil
		}}
	shut.Store(true)
	if _, err := replicate.Start(ctx, o); !errors.Is(err, fenced) {
		t.Fatalf("a fenced start: %v, want the fence's error", err)
	}
	if names := objects(t, c); len(names) != 0 {
		t.Fatalf("a fenced start put %v", names)
	}
	shut.Store(false)
	r, err := replicate.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	before := objects(t, c)
	insert(t, db, 50, 100)
	shut.Store(true)
	if err := r.Sync(ctx); !errors.Is(err, fenced) {
		t.Errorf("a fenced sync: %v", err)
	}
	if err := r.Close(ctx); !errors.Is(err, fenced) {
		t.Errorf("a fenced close: %v", err)
	}
	if after := objects(t, c); !slices.Equal(before, after) {
		t.Errorf("fenced syncs changed the bucket: %v -> %v", before, after)
	}
}

// objects are the bucket's replica objects.
func objects(t *testing.T, c *s3.Client) []string {
	t.Helper()
	names, err := c.List(t.Context(), "replica/")
	if err != nil {
		t.Fatal(err)
	}
	return names
}
