package doctorcmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/doctor"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
)

// doctorBuckets lists the S3 buckets agora.yaml names (blobs.s3 and s3 anchors) for doctor to
// probe.
func doctorBuckets(c *config.Config) []doctor.Bucket {
	var out []doctor.Bucket
	add := func(name string, l *config.S3Location, anchor bool) {
		b := doctor.Bucket{Name: name}
		cl, err := home.S3Client(c, l)
		if err != nil {
			b.Err = err
		} else {
			b.Where, b.Check = cl.Where(), cl.CheckBucket
			if anchor {
				// An anchor bucket without Object Lock fails every checkpoint's anchor:
				// doctor says so before the first one does.
				b.Check = func(ctx context.Context) error {
					if err := cl.CheckBucket(ctx); err != nil {
						return err
					}
					return cl.CheckObjectLock(ctx)
				}
			}
		}
		out = append(out, b)
	}
	if c.Blobs.S3 != nil {
		add("blobs bucket", c.Blobs.S3, false)
	}
	if c.Replicate.S3 != nil {
		add("replica bucket", c.Replicate.S3, false)
		replicaOwned(c, &out[len(out)-1])
	}
	for i, a := range c.Audit.Anchors {
		if a.Type == config.AnchorS3 && a.S3 != nil {
			add("anchor bucket "+strconv.Itoa(i), a.S3, true)
		}
	}
	return out
}

// doctorReplication reads what the serves replicating this home last published
// (DB-replicate.json), for doctor's "replication" rows.
func doctorReplication(c *config.Config, now time.Time) []doctor.Replication {
	if c.Replicate.S3 == nil || c.Home == "" {
		return nil
	}
	var out []doctor.Replication
	for _, db := range []string{"agora", "orch"} {
		x := doctor.Replication{DB: db + ".db", Lag: c.Replicate.LagOrDefault(), Now: now}
		if b, err := cmdutil.ReadLimited(filepath.Join(c.Home, db+"-"+replicate.PublishedFile), 64<<10); err == nil {
			var s replicate.Published
			if json.Unmarshal(b, &s) == nil {
				x.Published, x.Generation, x.Seq, x.Replicated, x.Err = true, s.Generation, s.Seq, s.Replicated, s.Error
			}
		}
		out = append(out, x)
	}
	return out
}

// replicaOwned adds to the replica bucket's probe a look at each database's newest generation:
// another home's there (two homes given one bucket and prefix) fails the row, naming both
// homes. A home whose keys do not read is left to the rows that check them.
func replicaOwned(c *config.Config, b *doctor.Bucket) {
	if b.Check == nil || c.Home == "" {
		return
	}
	pub, err1 := os.ReadFile(filepath.Join(c.Home, home.AuditPubFile))
	secret, err2 := os.ReadFile(filepath.Join(c.Home, home.SecretKeyFile))
	if err1 != nil || err2 != nil {
		return
	}
	cl, err := home.S3Client(c, c.Replicate.S3)
	if err != nil {
		return
	}
	identity, key, probe := strings.TrimSpace(string(pub)), replicate.SegmentKey(secret), b.Check
	b.Check = func(ctx context.Context) error {
		if err := probe(ctx); err != nil {
			return err
		}
		for _, db := range home.ReplicaDBs {
			o, ok, err := replicate.NewestOwner(ctx, cl, db, identity, key)
			if err != nil {
				return err
			}
			if ok && !o.Own {
				return replicate.ForeignError(cl, db, identity, o)
			}
		}
		return nil
	}
}
