package replicate

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/s3"
)

// A bucket prefix is one home's: its segments authenticate under that home's key and name its
// identity. Two homes given the same replicate.s3 bucket and prefix (one agora.yaml copied to
// two hosts) would each take the other's generations for planted ones; a prune then counted
// only its own toward keep_generations and removed everything older, the other home's live
// generation included. So a generation is only ever removed by the home it authenticates as,
// and a replicator refuses to start where the newest generation is another's.

// ErrForeignGeneration is matched (with [errors.Is]) by a replicator's start refused because
// the prefix's newest generation is not this home's.
var ErrForeignGeneration = errors.New("the replica prefix holds another home's generation")

// Owner says whose a generation is.
type Owner struct {
	Generation string
	// Own is true when the generation's first segment present authenticates under this home's
	// key and names this home, this database, this generation and its own number.
	Own bool
	// Claims is the identity the segment's header names, read without authenticating it (for
	// messages only: anyone who can write to the bucket can write any name there); "" when
	// the header does not read.
	Claims string
}

// generationOwner reads g's first segment present (segment 0, or the lowest one a prune
// stopped in the middle of left) and says whether it is this home's. Only an error reading the
// bucket is returned.
func generationOwner(ctx context.Context, c *s3.Client, db, identity string, key []byte, g generation) (Owner, error) {
	out := Owner{Generation: g.name}
	if len(g.seqs) == 0 {
		return out, nil
	}
	gen, err := hex.DecodeString(g.name)
	if err != nil || len(gen) != 16 {
		return out, nil
	}
	seq := g.seqs[0]
	b, _, err := c.Get(ctx, objectName(db, [16]byte(gen), seq), "", maxSegmentBytes+1)
	if errors.Is(err, s3.ErrNotFound) {
		return out, nil // pruned since the listing: not ours to judge, and nothing to remove
	}
	if err != nil {
		return out, fmt.Errorf("replica %s generation %s: %w", db, g.name, err)
	}
	out.Claims = claimedIdentity(b)
	s, err := decodeSegment(b, key)
	out.Own = err == nil && s.Identity == identity && s.DB == db && s.Generation == [16]byte(gen) && s.Seq == seq
	return out, nil
}

// NewestOwner says whose the database's newest generation in the bucket is; ok is false when
// the prefix holds no generation of it.
func NewestOwner(ctx context.Context, c *s3.Client, db, identity string, key []byte) (o Owner, ok bool, err error) {
	if err := checkDBName(db); err != nil {
		return Owner{}, false, err
	}
	gens, err := generations(ctx, c, db)
	if err != nil || len(gens) == 0 {
		return Owner{}, false, err
	}
	o, err = generationOwner(ctx, c, db, identity, key, gens[len(gens)-1])
	return o, err == nil, err
}

// ForeignError says, for people, that generation o in the database's prefix is another
// home's.
func ForeignError(c *s3.Client, db, identity string, o Owner) error {
	claims := "a segment that does not read as agora's"
	if o.Claims != "" {
		claims = fmt.Sprintf("a segment naming home %q", o.Claims)
	}
	return fmt.Errorf("%w: generation %s in %s begins with %s, not authenticated as this home's (%s): two homes replicate to one bucket and prefix; give each home its own replicate.s3 prefix (a home never prunes another's generations)",
		ErrForeignGeneration, o.Generation, c.ObjectURL("replica/"+db+"/"), claims, truncateID(identity))
}

// claimedIdentity reads the identity a segment's header names, without authenticating it,
// printable and cut to 80 bytes; "" when the header does not read.
func claimedIdentity(b []byte) string {
	if len(b) < len(magic)+2 || string(b[:len(magic)]) != magic {
		return ""
	}
	r := reader{b: b[len(magic):]}
	n := int(r.u16())
	if n == 0 || n > maxIdentity || n > len(r.b) {
		return ""
	}
	id := r.bytes(n)
	for _, c := range id {
		if c < 0x20 || c >= 0x7f {
			return ""
		}
	}
	return truncateID(string(id))
}

// truncateID cuts an identity (an audit public key, some 60 bytes) for a message.
func truncateID(id string) string {
	if len(id) > 80 {
		return id[:80] + "..."
	}
	return strings.TrimSpace(id)
}
