package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/doctor"
	"github.com/agora-dev/agora/internal/home"
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
		if b, err := readLimited(filepath.Join(c.Home, db+"-"+replicateStatusFile), 64<<10); err == nil {
			var s replicatedStatus
			if json.Unmarshal(b, &s) == nil {
				x.Published, x.Generation, x.Seq, x.Replicated, x.Err = true, s.Generation, s.Seq, s.Replicated, s.Error
			}
		}
		out = append(out, x)
	}
	return out
}
