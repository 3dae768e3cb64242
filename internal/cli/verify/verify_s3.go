package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/s3"
)

// CheckS3Anchor is the report row of an Object Lock anchor fetched from its bucket.
const CheckS3Anchor = "s3-anchor"

// anchorBucketClient is the client of --anchor-bucket s3://BUCKET[/PREFIX] at
// --anchor-endpoint, with credentials from the environment (AWS_*) or
// --anchor-credentials-file. An endpoint given as an IP literal may be private (the auditor
// typed it); a named one must resolve to public addresses.
func (o *verifyOptions) anchorBucketClient() (*s3.Client, error) {
	rest, ok := strings.CutPrefix(o.anchorBucket, "s3://")
	if !ok {
		return nil, fmt.Errorf("--anchor-bucket %q: want s3://BUCKET or s3://BUCKET/PREFIX", o.anchorBucket)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if o.anchorEndpoint == "" {
		return nil, errors.New("--anchor-bucket needs --anchor-endpoint (the S3 server's URL)")
	}
	creds, err := s3.LoadCredentials(o.anchorCreds, os.Getenv)
	if err != nil {
		return nil, err
	}
	var policy egress.Policy
	if u, err := url.Parse(o.anchorEndpoint); err == nil {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			policy.AllowPrivate = []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())}
		}
	}
	return s3.New(s3.Config{Endpoint: o.anchorEndpoint, Bucket: bucket, Prefix: prefix, Region: o.anchorRegion}, creds, policy)
}

// s3AnchorCopies fetches, for every s3 evidence of the bundle (or run bundle) in data, the
// object it names from the auditor's bucket and its retention. Each object's bytes become an
// anchored copy (so checkAnchoredCopy compares them with the bundle's anchored checkpoint) and
// each gets a row: the lock's mode and retain-until, or why it fails (missing, not COMPLIANCE,
// another checkpoint). A bundle with no s3 evidence fails: the auditor asked for one.
func s3AnchorCopies(ctx context.Context, c *s3.Client, data []byte) (copies [][]byte, rows []verify.Result) {
	var bundles []*verify.Bundle
	if b, err := verify.ParseBundleBytes(data); err == nil {
		bundles = append(bundles, b)
	} else if rb, err := verify.ParseRunBundle(bytes.NewReader(data)); err == nil {
		for _, part := range []*verify.Bundle{rb.Orch, rb.Dispatches} {
			if part != nil {
				bundles = append(bundles, part)
			}
		}
	}
	fail := func(item, format string, args ...any) {
		rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item, Detail: fmt.Sprintf(format, args...)})
	}
	checkedDirs := map[string]bool{}
	for _, b := range bundles {
		an := b.Anchored
		if an == nil {
			continue
		}
		for _, ev := range an.Evidence {
			if ev.Type != verify.AnchorS3 {
				continue
			}
			item := truncateText(ev.Locator, 80)
			// The log's other anchors: one hidden under a delete marker or written over is a
			// later checkpoint someone did not want read (a rolled-back log anchored past it).
			if dir := path.Dir(ev.Locator) + "/"; !checkedDirs[dir] && strings.HasPrefix(dir, "anchors/") {
				checkedDirs[dir] = true
				all, err := c.VersionsUnder(ctx, dir)
				if err == nil {
					err = anchor.S3AnchorsAltered(all)
				}
				if err != nil {
					fail(truncateText(dir, 80), "%v", err)
				} else {
					rows = append(rows, s3EarlierAnchors(ctx, c, b, dir, all)...)
				}
			}
			// Object Lock protects the version written, not the name: a later plain PUT makes
			// a new current version (a forked log's checkpoint under a fresh lock), and a
			// DELETE a marker over it. The anchor is the name's one and only version.
			versions, err := c.Versions(ctx, ev.Locator)
			if err != nil {
				fail(item, "%v", err)
				continue
			}
			switch {
			case len(versions) == 0:
				fail(item, "s3 object %s not found in %s", ev.Locator, c.Where())
				continue
			case len(versions) > 1:
				fail(item, "the bucket holds %d versions of the object (a delete marker or a later write over the locked one): the anchor was written again after it was locked, and no version of it is trusted", len(versions))
				continue
			case versions[0].DeleteMarker:
				fail(item, "the object's only version is a delete marker")
				continue
			}
			obj, info, err := c.Get(ctx, ev.Locator, versions[0].VersionID, verify.MaxCheckpointSize)
			if err != nil {
				fail(item, "%v", err)
				continue
			}
			copies = append(copies, obj)
			if !bytes.Equal(obj, an.Checkpoint) {
				fail(item, "the bucket's object is not the bundle's anchored checkpoint: the anchor or the bundle was altered")
				continue
			}
			lock, err := c.Retention(ctx, ev.Locator, info.VersionID)
			if errors.Is(err, s3.ErrNotLocked) {
				fail(item, "object version %s is not locked (no Object Lock retention): its owner may delete or replace it; an s3 anchor's object must be under COMPLIANCE retention", info.VersionID)
				continue
			}
			if err != nil {
				fail(item, "%v", err)
				continue
			}
			if lock.Mode != "COMPLIANCE" {
				fail(item, "object version %s is under %s retention, not COMPLIANCE: its owner may delete it", info.VersionID, lock.Mode)
				continue
			}
			rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item, OK: true,
				Detail: fmt.Sprintf("%s holds the anchored checkpoint, version %s, COMPLIANCE until %s", c.Where(), info.VersionID, lock.RetainUntil.Format(time.RFC3339))})
		}
	}
	if len(rows) == 0 {
		fail("", "the bundle carries no s3 anchor evidence to check against %s", c.Where())
	}
	return copies, rows
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
