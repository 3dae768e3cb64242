package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/s3"
)

// Each start of a replicating serve begins a generation (a whole copy, then its changes);
// nothing else removes the old ones. A prune keeps the newest Keep whole generations, every
// generation newer than the oldest of those (a newer one that is not whole, such as the
// running serve's while its first copy uploads, or a forged one, is what a restore falls back
// from, so the whole one before it stays), and removes the rest.
//
// Only this home's generations are removed: one whose first segment present does not
// authenticate as this home's (another home's, on a prefix two homes were given) stays, and
// the plan lists it (owner.go).
//
// Whole means what a restore needs to start from a generation: its first sync, segment 0 up
// to the first that ends a sync, all present, authenticated under the home's key, naming this
// home, this database and generation, each following the one before. A generation that does
// not check is never counted as whole, so objects a bucket writer planted can make a prune
// keep more, never remove more.

// PruneOptions say which replica to prune and how much to keep.
type PruneOptions struct {
	Client *s3.Client
	// DB is the database's name in the bucket ("agora", "orch").
	DB string
	// Identity and Key are the home's, as for [RestoreOptions].
	Identity string
	Key      []byte
	// Keep is how many whole generations stay, newest first; at least 1.
	Keep int
	// Fence, when set, is asked before each delete; its error stops the prune.
	Fence func() error
}

// PrunedGeneration is one generation a prune removes (or, planned, would).
type PrunedGeneration struct {
	DB         string    `json:"db"`
	Generation string    `json:"generation"`
	Began      time.Time `json:"began"`
	Segments   int       `json:"segments"`
}

// PrunePlan is what a prune of one database would do.
type PrunePlan struct {
	DB string `json:"db"`
	// Kept are the whole generations kept, newest first.
	Kept []string `json:"kept"`
	// Remove are this home's generations older than the oldest kept whole one, oldest first.
	Remove []PrunedGeneration `json:"remove"`
	// Foreign are the older generations that are not this home's (see owner.go), left where
	// they are, oldest first.
	Foreign []Owner `json:"foreign,omitempty"`
}

// PlanPrune lists the database's generations and says which a prune removes; it deletes
// nothing. A listing holding a name that is not a replica segment fails it: nothing is
// planned from a bucket that does not read as agora wrote it.
func PlanPrune(ctx context.Context, o PruneOptions) (PrunePlan, error) {
	plan := PrunePlan{DB: o.DB, Kept: []string{}, Remove: []PrunedGeneration{}}
	if err := checkDBName(o.DB); err != nil {
		return plan, err
	}
	if o.Keep < 1 {
		return plan, fmt.Errorf("prune %s: keep %d whole generations: at least 1", o.DB, o.Keep)
	}
	if len(o.Key) < 16 {
		return plan, errors.New("prune: the home's segment key is required")
	}
	gens, err := generations(ctx, o.Client, o.DB)
	if err != nil {
		return plan, err
	}
	oldestKept := len(gens)
	for i := len(gens) - 1; i >= 0 && len(plan.Kept) < o.Keep; i-- {
		whole, err := wholeFirstSync(ctx, o, gens[i])
		if err != nil {
			return plan, err
		}
		if whole {
			plan.Kept = append(plan.Kept, gens[i].name)
			oldestKept = i
		}
	}
	if len(plan.Kept) < o.Keep {
		return plan, nil // fewer whole generations than Keep: everything stays
	}
	for _, g := range gens[:oldestKept] {
		owner, err := generationOwner(ctx, o.Client, o.DB, o.Identity, o.Key, g)
		if err != nil {
			return plan, fmt.Errorf("prune %s: %w", o.DB, err)
		}
		if !owner.Own {
			plan.Foreign = append(plan.Foreign, owner)
			continue
		}
		plan.Remove = append(plan.Remove, PrunedGeneration{DB: o.DB, Generation: g.name, Began: g.created.UTC(), Segments: len(g.seqs)})
	}
	return plan, nil
}

// Prune deletes the generations plan removes, segment 0 first, so a generation a prune
// stopped in the middle of fails a restore that reaches it (no segment 0) rather than
// restoring a part of it. The plan must come from [PlanPrune] with the same options; the
// segments deleted are the ones listed now, of plan's generations only.
func Prune(ctx context.Context, o PruneOptions, plan PrunePlan) (deleted int, err error) {
	if len(plan.Remove) == 0 {
		return 0, nil
	}
	gens, err := generations(ctx, o.Client, o.DB)
	if err != nil {
		return 0, err
	}
	byName := map[string]generation{}
	for _, g := range gens {
		byName[g.name] = g
	}
	for _, pg := range plan.Remove {
		g, ok := byName[pg.Generation]
		if !ok {
			continue // gone since the plan
		}
		for _, seq := range g.seqs {
			if o.Fence != nil {
				if err := o.Fence(); err != nil {
					return deleted, fmt.Errorf("prune %s generation %s: %w", o.DB, g.name, err)
				}
			}
			if err := o.Client.Delete(ctx, objectName(o.DB, mustGen(g.name), seq), ""); err != nil {
				return deleted, fmt.Errorf("prune %s: %w", o.DB, err)
			}
			deleted++
		}
	}
	return deleted, nil
}

// wholeFirstSync says whether g's first sync is all there and checks (see the file's
// comment). A segment that fails a check makes the generation not whole; only an error
// reading the bucket is returned.
func wholeFirstSync(ctx context.Context, o PruneOptions, g generation) (bool, error) {
	var prev [32]byte
	pages := 0
	for i, seq := range g.seqs {
		if seq != uint64(i) {
			return false, nil
		}
		name := objectName(o.DB, mustGen(g.name), seq)
		b, _, err := o.Client.Get(ctx, name, "", maxSegmentBytes+1)
		if err != nil {
			return false, fmt.Errorf("prune %s: %w", o.DB, err)
		}
		s, err := decodeSegment(b, o.Key)
		if err != nil || s.Identity != o.Identity || s.DB != o.DB || hex.EncodeToString(s.Generation[:]) != g.name ||
			s.Seq != seq || s.Prev != prev {
			return false, nil
		}
		pages += len(s.Pages)
		if s.Commit {
			return pages == int(s.PageCount), nil
		}
		prev = sha256.Sum256(b)
	}
	return false, nil
}
