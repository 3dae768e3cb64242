package anchor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/s3"
)

// S3 writes each checkpoint as its own object, PREFIX/anchors/LOG/<size, 20 digits>, under
// Object Lock in COMPLIANCE mode retained for a fixed period: inside it, no one (agora's
// operator and the bucket's owner included) can delete or shorten the locked version, and a
// conditional write (If-None-Match) refuses a second object of the same size. Before writing
// it hands the bucket's latest checkpoint of the log to checkPrevious, so a database rolled
// back behind the bucket is refused. The evidence names the object and its version, and the
// retention the server confirmed; `agora verify --anchor-bucket` fetches both again.
type S3 struct {
	c         *s3.Client
	log       string
	retention time.Duration
	now       func() time.Time
}

// NewS3 returns an anchor writing log's checkpoints (log is "agora", "orch") to c's bucket.
func NewS3(c *s3.Client, log string, retention time.Duration, now func() time.Time) (*S3, error) {
	if err := checkLogName(log); err != nil {
		return nil, err
	}
	if retention < 24*time.Hour {
		return nil, errors.New("s3 anchor: retention under one day")
	}
	if now == nil {
		now = time.Now
	}
	return &S3{c: c, log: log, retention: retention, now: now}, nil
}

// Name is where the log's anchors live, "s3://bucket/prefix/anchors/agora at host"; it holds
// no credentials.
func (a *S3) Name() string { return a.c.ObjectURL(S3AnchorDir(a.log)) }

// S3AnchorDir is the directory of log's anchors under a bucket's prefix.
func S3AnchorDir(log string) string { return "anchors/" + log + "/" }

// S3AnchorName is the object name of log's checkpoint of size under the prefix.
func S3AnchorName(log string, size uint64) string {
	return fmt.Sprintf("%s%020d", S3AnchorDir(log), size)
}

// Anchor writes checkpoint after checkPrevious accepts the bucket's latest one.
func (a *S3) Anchor(ctx context.Context, checkpoint []byte, checkPrevious func(context.Context, []byte) error) (verify.Evidence, error) {
	size, err := CheckpointSize(checkpoint)
	if err != nil {
		return verify.Evidence{}, err
	}
	prev, err := a.latest(ctx, "refusing to anchor")
	if err != nil {
		return verify.Evidence{}, err
	}
	if err := checkPrevious(ctx, prev); err != nil {
		return verify.Evidence{}, err
	}
	name := S3AnchorName(a.log, size)
	until := a.now().Add(a.retention).UTC().Truncate(time.Second)
	info, err := a.c.Put(ctx, name, checkpoint, true, &s3.Lock{Mode: "COMPLIANCE", RetainUntil: until})
	if errors.Is(err, s3.ErrExists) {
		// A retry after a crash between the write and its record: the same bytes are fine,
		// other bytes of the same size are a fork of the log.
		got, gi, gerr := a.c.Get(ctx, name, "", verify.MaxCheckpointSize)
		if gerr != nil {
			return verify.Evidence{}, gerr
		}
		if !bytes.Equal(got, checkpoint) {
			return verify.Evidence{}, fmt.Errorf("%s already holds another checkpoint of size %d: the log forked", a.Name(), size)
		}
		info, err = gi, nil
	}
	if err != nil {
		return verify.Evidence{}, err
	}
	if info.VersionID == "" {
		return verify.Evidence{}, fmt.Errorf("%s: the server returned no object version: is Object Lock (and so versioning) enabled on the bucket?", a.Name())
	}
	lock, err := a.c.Retention(ctx, name, info.VersionID)
	if err != nil {
		return verify.Evidence{}, err
	}
	if lock.Mode != "COMPLIANCE" || lock.RetainUntil.Before(until) {
		return verify.Evidence{}, fmt.Errorf("%s: the server keeps %s under %s until %s, not COMPLIANCE until %s", a.Name(), name, lock.Mode, lock.RetainUntil.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	sum := sha256.Sum256(checkpoint)
	return verify.Evidence{
		Type:             verify.AnchorS3,
		Name:             a.Name(),
		At:               a.now().UTC(),
		CheckpointSHA256: sum[:],
		Locator:          name,
		Receipt:          []byte("version " + info.VersionID + ", " + lock.Mode + " until " + lock.RetainUntil.Format(time.RFC3339)),
	}, nil
}

// Latest is the log's newest anchored checkpoint in the bucket, nil when it holds none. A delete
// marker or a second version of any anchor is an error (see [S3.Anchor]): `agora restore`
// checks a restored log against it, and must not be shown an older one.
func (a *S3) Latest(ctx context.Context) ([]byte, error) {
	return a.latest(ctx, "refusing to trust its anchors until an operator looks")
}

func (a *S3) latest(ctx context.Context, refusal string) ([]byte, error) {
	// A delete marker hides an anchor from the listing below (Object Lock refuses deleting a
	// locked version, not marking it deleted); a second version of a key replaces what a GET
	// reads. Either would let a rolled-back log pass the check against the latest anchor.
	versions, err := a.c.VersionsUnder(ctx, S3AnchorDir(a.log))
	if err != nil {
		return nil, err
	}
	if err := S3AnchorsAltered(versions); err != nil {
		return nil, fmt.Errorf("%s: %w; %s", a.Name(), err, refusal)
	}
	names, err := a.c.List(ctx, S3AnchorDir(a.log))
	if err != nil || len(names) == 0 {
		return nil, err
	}
	prev, _, err := a.c.Get(ctx, names[len(names)-1], "", verify.MaxCheckpointSize)
	return prev, err
}

// S3AnchorsAltered reports the first sign, in a listing of every version under a log's anchor
// directory, that its anchors were written over or hidden: a delete marker, or a key with more
// than one version (agora writes each anchor once, If-None-Match). Object Lock keeps the locked
// versions; these hide or shadow them.
func S3AnchorsAltered(versions []s3.ListedVersion) error {
	seen := map[string]bool{}
	for _, v := range versions {
		if v.DeleteMarker {
			return fmt.Errorf("the anchor %s has a delete marker over it: an anchor was hidden", v.Key)
		}
		if seen[v.Key] {
			return fmt.Errorf("the anchor %s has more than one version: an anchor was written over", v.Key)
		}
		seen[v.Key] = true
	}
	return nil
}

// CheckpointSize reads the tree size of a signed checkpoint note.
func CheckpointSize(note []byte) (uint64, error) {
	body, _, ok := bytes.Cut(note, []byte("\n\n"))
	if !ok {
		return 0, errors.New("checkpoint: not a signed note")
	}
	cp, err := verify.ParseCheckpoint(append(body[:len(body):len(body)], '\n'))
	if err != nil {
		return 0, err
	}
	return cp.Size, nil
}

func checkLogName(log string) error {
	if log == "" || strings.Trim(log, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("s3 anchor: log name %q: want lowercase letters, digits and '-'", log)
	}
	return nil
}
