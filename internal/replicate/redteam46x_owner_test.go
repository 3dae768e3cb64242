package replicate_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
)

// Replica prefix ownership (owner.go, prune.go, replicate.go).

// TestRedTeam46xOwner_UppercaseAliasPrunesOwnLiveGeneration: attack: a bucket writer (who can
// put objects, e.g. a write-only credential, or another home's misconfigured tooling) plants
// objects under the UPPERCASE spelling of this home's live generation name. generations()
// accepts the name (hex.DecodeString takes upper case) as a generation of its own; it sorts
// before the lower-case one (A-F < a-f), so it is "older" than the kept whole generation.
// generationOwner decodes the name to bytes and reads objectName(bytes, seq) — which is the
// lower-case, real, authenticated segment — so the planted alias is judged "this home's"
// and planned for removal; Prune then deletes objectName(bytes, seq) for every planted seq:
// the home's own live generation. The package's promise is "objects a bucket writer planted
// can make a prune keep more, never remove more".
func TestRedTeam46xOwner_UppercaseAliasPrunesOwnLiveGeneration(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, path), 0, 20)
	live := generationOf(t, c, path)
	alias := strings.ToUpper(live)
	if alias == live {
		t.Fatalf("fixture: generation %s has no hex letter to spell in upper case (one in 2^80)", live)
	}
	own, err := c.List(t.Context(), "replica/agora/"+live+"/")
	if err != nil || len(own) == 0 {
		t.Fatalf("list: %v %v", own, err)
	}
	for _, n := range own {
		seq := n[strings.LastIndex(n, "/")+1:]
		put(t, c, "replica/agora/"+alias+"/"+seq, []byte("planted"))
	}

	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1))
	if err != nil {
		// Refusing the listing outright (as for any non-canonical name) is a holding answer.
		if _, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: filepath.Join(t.TempDir(), "agora.db")}); err != nil {
			t.Logf("restore with the alias planted: %v", err)
		}
		return
	}
	if slices.Contains(removed(plan), alias) {
		t.Errorf("PlanPrune plans the planted upper-case alias %s of the live generation for removal (judged own by reading the lower-case object): %+v", alias, plan)
	}
	if _, err := replicate.Prune(t.Context(), pruneOpts(c, 1), plan); err != nil {
		t.Fatal(err)
	}
	left, _ := c.List(t.Context(), "replica/agora/"+live+"/")
	if len(left) != len(own) {
		t.Fatalf("a prune (keep 1) after planting %d objects under %s deleted %d of the %d segments of this home's LIVE generation %s: a bucket writer's plant made the home delete its own newest (only) replica",
			len(own), alias, len(own)-len(left), len(own), live)
	}
}

// TestRedTeam46xOwner_UppercaseAliasOfAnotherHomesGeneration: the same alias trick aimed at
// another home's generation: the alias reads the other home's segment, which does not
// authenticate as ours, so it is foreign and nothing of the other home's is deleted.
func TestRedTeam46xOwner_UppercaseAliasOfAnotherHomesGeneration(t *testing.T) {
	_, _, shared := bucket(t)
	_, _, elsewhere := bucket(t)
	pathA := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, pathA), 0, 5)
	a := generationAs(t, elsewhere, pathA, otherIdentity, otherKey)
	pathB := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, pathB), 0, 5)
	generationAs(t, shared, pathB, identity, testKey)
	generationAs(t, shared, pathB, identity, testKey)
	copyGeneration(t, elsewhere, shared, a)
	if strings.ToUpper(a) != a {
		put(t, shared, "replica/agora/"+strings.ToUpper(a)+"/0000000000000000", []byte("planted"))
	}
	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(shared, 1))
	if err != nil {
		return // refused: holds
	}
	if _, err := replicate.Prune(t.Context(), pruneOpts(shared, 1), plan); err != nil {
		t.Fatal(err)
	}
	if countSegments(t, shared, a) == 0 {
		t.Fatalf("B's prune deleted another home's generation %s via an alias (plan %+v)", a, plan)
	}
}

// TestRedTeam46xOwner_MixedGenerationOwnedByFirstSegment: a generation whose segment 0 is
// another home's but later segments are this home's (planted copies) stays foreign; one whose
// segment 0 a bucket writer replaced by garbage stays (keeps more). Neither is removed.
func TestRedTeam46xOwner_MixedGenerationOwnedByFirstSegment(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, path), 0, 5)
	g1 := generationOf(t, c, path)
	g2 := generationOf(t, c, path)
	// g1's segment 0 replaced by something not ours: g1 is no longer provably ours, it stays.
	put(t, c, "replica/agora/"+g1+"/0000000000000000", []byte("agrepl01garbage"))
	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 0 || !slices.Equal(plan.Kept, []string{g2}) || len(plan.Foreign) != 1 || plan.Foreign[0].Generation != g1 {
		t.Fatalf("plan %+v: want g2 kept, g1 (segment 0 not ours) foreign, nothing removed", plan)
	}
}

// header builds a segment header prefix claiming identity id (unauthenticated).
func header(id []byte) []byte {
	b := []byte("agrepl01")
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	return append(b, make([]byte, 200)...)
}

// TestRedTeam46xOwner_ClaimedIdentityNeverCarriesControls: a planted newest generation whose
// header claims an identity with ANSI escapes, newlines, NUL, non-ASCII, or 512 bytes: the
// start refusal (which reaches serve's log and doctor) never carries a raw control byte, and
// the claim is cut.
func TestRedTeam46xOwner_ClaimedIdentityNeverCarriesControls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, path), 0, 2)
	for name, id := range map[string]string{
		"ansi":     "\x1b[2J\x1b[31mowned\x1b[0m",
		"newline":  "home\nlevel=ERROR msg=forged",
		"nul":      "home\x00x",
		"del":      "home\x7f",
		"unicode":  "home\u202eevil",
		"huge":     strings.Repeat("A", 512),
		"hugeplus": strings.Repeat("B", 513),
		"quote":    `a" level=ERROR b="`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, c := bucket(t)
			put(t, c, "replica/agora/ffffffffffffffffffffffffffffffff/0000000000000000", header([]byte(id)))
			_, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
			if !errors.Is(err, replicate.ErrForeignGeneration) {
				t.Fatalf("start: %v", err)
			}
			msg := err.Error()
			for _, r := range msg {
				if r < 0x20 || r == 0x7f || r == '\u202e' {
					t.Fatalf("refusal carries control %q: %q", r, msg)
				}
			}
			if len(msg) > 1200 {
				t.Fatalf("refusal of %d bytes: the claim is not cut", len(msg))
			}
			o, ok, err := replicate.NewestOwner(t.Context(), c, "agora", identity, testKey)
			if err != nil || !ok || o.Own {
				t.Fatalf("NewestOwner: %+v %v %v", o, ok, err)
			}
			if len(o.Claims) > 83 || strings.ContainsAny(o.Claims, "\x1b\n\x00\x7f") {
				t.Fatalf("claims %q", o.Claims)
			}
		})
	}
}

// TestRedTeam46xOwner_SegmentZeroGoneBetweenListingAndCheck: generationOwner on a listing
// whose first segment is gone answers "not own", never an error or a removal; modelled by
// a generation of only a higher-numbered planted object that is then deleted before the plan
// (NotFound path through NewestOwner).
func TestRedTeam46xOwner_NotFoundIsNotOwn(t *testing.T) {
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	insert(t, openDB(t, path), 0, 2)
	g1 := generationOf(t, c, path)
	g2 := generationOf(t, c, path)
	// g1 with its segment 0 deleted (a prune stopped in the middle): first present is seq 1
	// if there is one, else nothing.
	if err := c.Delete(t.Context(), "replica/agora/"+g1+"/0000000000000000", ""); err != nil {
		t.Fatal(err)
	}
	plan, err := replicate.PlanPrune(t.Context(), pruneOpts(c, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Kept, []string{g2}) {
		t.Fatalf("plan %+v", plan)
	}
}
