package replicate_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// The other home of the two-homes tests: its own identity and key, as a second `agora init`
// gives it.
const otherIdentity = "agora-home-other+5678ef01+BAUG"

var otherKey = replicate.SegmentKey([]byte("the other home's secret key, 32b"))

// generationAs starts and closes a replicator of path as the home (id, key): one whole
// generation in c.
func generationAs(t *testing.T, c *s3.Client, path, id string, key []byte) string {
	t.Helper()
	r, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: path, Identity: id, Key: key, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Status().Generation
}

// copyGeneration copies generation gen's segments from one bucket to another, byte for byte:
// what a second home replicating to the same prefix leaves there.
func copyGeneration(t *testing.T, from, to *s3.Client, gen string) {
	t.Helper()
	names, err := from.List(t.Context(), "replica/agora/"+gen+"/")
	if err != nil || len(names) == 0 {
		t.Fatalf("list %s: %v, %v", gen, names, err)
	}
	for _, n := range names {
		b, _, err := from.Get(t.Context(), n, "", 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		put(t, to, n, b)
	}
}

// TestPrune_AnotherHomesGenerationsStay: two homes given one bucket and prefix. Home A's two
// generations are older than home B's two (A replicated first; B's began while A was down, or
// both began at once); B's prune with keep_generations 1 keeps its newest and removes its
// older one, and leaves both of A's, listed as foreign and named by what they claim. A still
// restores its newest state; so does B.
func TestPrune_AnotherHomesGenerationsStay(t *testing.T) {
	_, _, shared := bucket(t)
	_, _, elsewhere := bucket(t)
	pathA := filepath.Join(t.TempDir(), "agora.db")
	dbA := openDB(t, pathA)
	insert(t, dbA, 0, 10)
	a1 := generationAs(t, elsewhere, pathA, otherIdentity, otherKey)
	insert(t, dbA, 10, 15)
	a2 := generationAs(t, elsewhere, pathA, otherIdentity, otherKey)
	pathB := filepath.Join(t.TempDir(), "agora.db")
	dbB := openDB(t, pathB)
	insert(t, dbB, 0, 3)
	beforeB := time.Now()
	b1 := generationAs(t, shared, pathB, identity, testKey)
	insert(t, dbB, 3, 7)
	b2 := generationAs(t, shared, pathB, identity, testKey)
	copyGeneration(t, elsewhere, shared, a1)
	copyGeneration(t, elsewhere, shared, a2)
	if !(a1 < a2 && a2 < b1 && b1 < b2) {
		t.Fatalf("fixture: generations %s %s (A) %s %s (B) are not in that order", a1, a2, b1, b2)
	}

	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(shared, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(plan); !slices.Equal(got, []string{b1}) || !slices.Equal(plan.Kept, []string{b2}) {
		t.Fatalf("B's plan removes %v keeps %v; want only B's own older %s removed, %s kept", got, plan.Kept, b1, b2)
	}
	var foreign []string
	for _, o := range plan.Foreign {
		foreign = append(foreign, o.Generation)
		if o.Own || o.Claims != otherIdentity {
			t.Errorf("foreign generation %s: own %v, claims %q; want another home's, claiming %q", o.Generation, o.Own, o.Claims, otherIdentity)
		}
	}
	if !slices.Equal(foreign, []string{a1, a2}) {
		t.Fatalf("B's plan lists %v as another home's, want %v", foreign, []string{a1, a2})
	}
	if _, err := replicate.Prune(t.Context(), pruneOpts(shared, 1), plan); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]int{a1: 1, a2: 1, b1: 0, b2: 1} {
		if left, _ := shared.List(t.Context(), "replica/agora/"+g+"/"); (len(left) > 0) != (want > 0) {
			t.Errorf("generation %s: %d segments left after B's prune, want them %s", g, len(left), map[bool]string{true: "kept", false: "removed"}[want > 0])
		}
	}

	// Both homes restore their own newest state from the shared prefix: A's plain restore
	// refuses B's newer generation by name (it never restores another home's state, nor
	// silently an older one of its own), and says how to pass over it: --at before it began.
	outA := filepath.Join(t.TempDir(), "agora.db")
	_, err = replicate.Restore(t.Context(), replicate.RestoreOptions{Client: shared, DB: "agora", Identity: otherIdentity, Key: otherKey, Path: outA})
	if err == nil || !strings.Contains(err.Error(), "another home's replica") || !strings.Contains(err.Error(), "--at") {
		t.Fatalf("A's restore with B's generation newest: %v; want it refused, saying how to pass over it", err)
	}
	res, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: shared, DB: "agora", Identity: otherIdentity, Key: otherKey, Path: outA, At: beforeB})
	if err != nil || res.Generation != a2 {
		t.Fatalf("A's restore --at before B's first generation, after B's prune: %+v, %v; want generation %s", res, err, a2)
	}
	wantRows(t, outA, 15)
	outB := filepath.Join(t.TempDir(), "agora.db")
	if res, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: shared, DB: "agora", Identity: identity, Key: testKey, Path: outB}); err != nil || res.Generation != b2 {
		t.Fatalf("B's restore: %+v, %v; want generation %s", res, err, b2)
	}
	wantRows(t, outB, 7)

	// A's own prune (keep 1) keeps a2, removes a1, and leaves B's newer ones.
	aOpts := replicate.PruneOptions{Client: shared, DB: "agora", Identity: otherIdentity, Key: otherKey, Keep: 1}
	planA, err := replicate.PlanPrune(t.Context(), aOpts)
	if err != nil || !slices.Equal(removed(planA), []string{a1}) || !slices.Equal(planA.Kept, []string{a2}) {
		t.Fatalf("A's plan: removes %v keeps %v (%v); want %s removed, %s kept", removed(planA), planA.Kept, err, a1, a2)
	}
}

// TestStart_RefusedAfterAnotherHomesGeneration: a replicator does not begin a generation after
// another home's newest one (its own restores would then fall back past it, and the two homes'
// generations would interleave); it says why, naming the prefix and both homes. The home whose
// generation is newest starts as before.
func TestStart_RefusedAfterAnotherHomesGeneration(t *testing.T) {
	_, _, c := bucket(t)
	pathB := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, pathB), 0, 3)
	newest := generationAs(t, c, pathB, identity, testKey)

	pathA := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, pathA), 0, 5)
	_, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: pathA, Identity: otherIdentity, Key: otherKey, Lag: time.Hour})
	if !errors.Is(err, replicate.ErrForeignGeneration) {
		t.Fatalf("A's start after B's generation: %v, want ErrForeignGeneration", err)
	}
	for _, want := range []string{newest, identity, otherIdentity, "replica/agora/", "own replicate.s3 prefix"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if gens, _ := c.List(t.Context(), "replica/agora/"); len(gens) != countSegments(t, c, newest) {
		t.Errorf("the refused start wrote to the bucket: %v", gens)
	}
	// B, whose generation is the newest, starts again.
	if g := generationAs(t, c, pathB, identity, testKey); g <= newest {
		t.Errorf("B's next generation %s does not sort after %s", g, newest)
	}

	// A planted object that is no agora segment at all is refused the same way, naming no home.
	_, _, c2 := bucket(t)
	put(t, c2, "replica/agora/ffffffffffffffffffffffffffffffff/0000000000000000", []byte("planted"))
	_, err = replicate.Start(t.Context(), replicate.Options{Client: c2, DB: "agora", Path: pathB, Identity: identity, Key: testKey, Lag: time.Hour})
	if !errors.Is(err, replicate.ErrForeignGeneration) || !strings.Contains(err.Error(), "does not read as agora's") {
		t.Fatalf("start after a planted generation: %v", err)
	}
}

func countSegments(t *testing.T, c *s3.Client, gen string) int {
	t.Helper()
	names, err := c.List(t.Context(), "replica/agora/"+gen+"/")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}
