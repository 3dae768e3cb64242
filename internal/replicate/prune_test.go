package replicate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// generationOf starts and closes a replicator of the database at path: one whole generation.
func generationOf(t *testing.T, c *s3.Client, path string) string {
	t.Helper()
	r, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Status().Generation
}

func pruneOpts(c *s3.Client, keep int) replicate.PruneOptions {
	return replicate.PruneOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Keep: keep}
}

func removed(p replicate.PrunePlan) []string {
	var out []string
	for _, g := range p.Remove {
		out = append(out, g.Generation)
	}
	return out
}

// TestPrune_KeepsNewestWhole: three whole generations, keep 1: the two older go, the replica
// still restores the newest state, and a prune of what is left removes nothing.
func TestPrune_KeepsNewestWhole(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 10)
	g1 := generationOf(t, c, path)
	insert(t, db, 10, 20)
	g2 := generationOf(t, c, path)
	insert(t, db, 20, 30)
	g3 := generationOf(t, c, path)
	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(plan); len(got) != 2 || got[0] != g1 || got[1] != g2 || len(plan.Kept) != 1 || plan.Kept[0] != g3 {
		t.Fatalf("plan removes %v keeps %v, want %s %s removed and %s kept", got, plan.Kept, g1, g2, g3)
	}
	if n, err := replicate.Prune(t.Context(), pruneOpts(c, 1), plan); err != nil || n == 0 {
		t.Fatalf("prune: %d deleted, %v", n, err)
	}
	for _, g := range []string{g1, g2} {
		if left, _ := c.List(t.Context(), "replica/agora/"+g+"/"); len(left) != 0 {
			t.Errorf("generation %s has %d segments left", g, len(left))
		}
	}
	out := filepath.Join(t.TempDir(), "agora.db")
	if res, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out}); err != nil || res.Generation != g3 {
		t.Fatalf("restore after the prune: %+v, %v; want generation %s", res, err, g3)
	}
	wantRows(t, out, 30)
	if again, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1)); err != nil || len(again.Remove) != 0 {
		t.Errorf("a second plan: %v, %v; want nothing to remove", removed(again), err)
	}
}

// TestPrune_NeverTheFallback is the attack of a pruning that would remove the only whole
// generation: the newest generation is half uploaded (a serve killed as it began, or the
// running serve's first copy). A restore falls back to the whole one before it, so with keep
// 1 that one stays, the half one stays, and only older ones go. A replica whose only
// generation is half uploaded keeps it, and a forged newer generation (not under the home's
// key) counts as nothing.
func TestPrune_NeverTheFallback(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 20)
	old := generationOf(t, c, path)
	whole := generationOf(t, c, path)
	insert(t, db, 20, 32000) // the next generation's first sync spans several segments
	half := halfGeneration(t, c, path)
	// A forged generation named after all of them: segment 0 of another key.
	forged := "ffffffffffffffffffffffffffffffff"
	put(t, c, "replica/agora/"+forged+"/0000000000000000", append([]byte("not a segment of this home "), make([]byte, 64)...))
	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(plan); len(got) != 1 || got[0] != old || len(plan.Kept) != 1 || plan.Kept[0] != whole {
		t.Fatalf("plan removes %v keeps %v; want only %s removed, %s kept (the fallback of half %s)", got, plan.Kept, old, whole, half)
	}
	if _, err := replicate.Prune(t.Context(), pruneOpts(c, 1), plan); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agora.db")
	res, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out})
	if err == nil && res.Generation != whole {
		t.Errorf("restored %s, want the whole generation %s", res.Generation, whole)
	}
	if err != nil && !strings.Contains(err.Error(), forged) {
		t.Fatalf("restore after the prune: %v", err)
	}

	_, _, c2 := bucket(t)
	only := halfGeneration(t, c2, path)
	plan, err = replicate.PlanPrune(t.Context(), pruneOpts(c2, 1))
	if err != nil || len(plan.Remove) != 0 {
		t.Fatalf("a replica whose only generation %s is half uploaded: plan removes %v (%v)", only, removed(plan), err)
	}
}

// TestPrune_HostileListing: a bucket listing with a name that is not a replica segment (a
// traversal, a short generation, a key outside the layout) plans nothing and deletes nothing.
func TestPrune_HostileListing(t *testing.T) {
	for _, name := range []string{
		"replica/agora/00/0000000000000000",
		"replica/agora/0000000000000000000000000000000g/0000000000000000",
		"replica/agora/00000000000000000000000000000000/0000000000000000/x",
		"replica/agora/00000000000000000000000000000000/zz",
		"replica/agora/x",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, c := bucket(t)
			path := filepath.Join(t.TempDir(), "agora.db")
			insert(t, openDB(t, path), 0, 5)
			generationOf(t, c, path)
			generationOf(t, c, path)
			put(t, c, name, []byte("x"))
			before, _ := c.List(t.Context(), "replica/")
			if _, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1)); err == nil || !strings.Contains(err.Error(), "not a replica segment name") {
				t.Fatalf("plan over a listing holding %q: %v, want a refusal", name, err)
			}
			if after, _ := c.List(t.Context(), "replica/"); len(after) != len(before) {
				t.Errorf("objects %d before, %d after", len(before), len(after))
			}
		})
	}
}

// TestPrune_Fenced: a prune whose fence refuses (an old leader) deletes nothing.
func TestPrune_Fenced(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, path), 0, 5)
	generationOf(t, c, path)
	generationOf(t, c, path)
	o := pruneOpts(c, 1)
	plan, err := replicate.PlanPrune(t.Context(), o)
	if err != nil || len(plan.Remove) != 1 {
		t.Fatalf("plan %v, %v", removed(plan), err)
	}
	before, _ := c.List(t.Context(), "replica/")
	o.Fence = func() error { return errors.New("lease agora/leader: leadership ended; refusing to commit") }
	if n, err := replicate.Prune(t.Context(), o, plan); err == nil || n != 0 {
		t.Fatalf("a fenced prune deleted %d (%v)", n, err)
	}
	if after, _ := c.List(t.Context(), "replica/"); len(after) != len(before) {
		t.Errorf("objects %d before, %d after a fenced prune", len(before), len(after))
	}
}
