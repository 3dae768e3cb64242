package blob

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/digest"
)

// remoteTimeout bounds one remote blob call: Store's methods take no context (they predate
// object storage), so each call gets its own deadline.
const remoteTimeout = 2 * time.Minute

// Remote is an object store that holds blobs by name ("sha256/ab/<hex>"), e.g. an S3 bucket
// (s3.Blobs). Its errors MUST NOT carry credentials.
type Remote interface {
	// Where names the store for people, e.g. "s3://bucket/prefix/ at host".
	Where() string
	// PutBlob writes b as name (overwriting is harmless: the name is b's digest).
	PutBlob(ctx context.Context, name string, b []byte) error
	// GetBlob reads name, refusing more than max bytes; found is false when it is absent.
	GetBlob(ctx context.Context, name string, max int64) (b []byte, found bool, err error)
	// HasBlob reports whether name exists.
	HasBlob(ctx context.Context, name string) (bool, error)
}

// OpenRemote returns a store keeping its blobs in r, content-addressed as on disk and
// verified on every read: a blob altered in the bucket is an [*IntegrityError], never
// returned.
func OpenRemote(r Remote) *Store { return &Store{remote: r} }

// Where names where the store keeps blobs: a directory or the remote's name.
func (s *Store) Where() string {
	if s.remote != nil {
		return s.remote.Where()
	}
	return s.dir
}

func remoteName(d digest.Digest) string {
	h := d.Hex()
	return "sha256/" + h[:2] + "/" + h
}

func (s *Store) putRemote(d digest.Digest, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	if err := s.remote.PutBlob(ctx, remoteName(d), b); err != nil {
		return fmt.Errorf("store blob %s: %w", d, err)
	}
	return nil
}

// maxRemoteBlob caps a remote read when the caller sets no limit: a swapped object cannot
// make agora read an unbounded body (1 GiB, above any blob agora writes).
const maxRemoteBlob = 1 << 30

func (s *Store) getRemote(d digest.Digest, maxSize int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	limit := maxSize
	if limit <= 0 {
		limit = maxRemoteBlob
	}
	b, found, err := s.remote.GetBlob(ctx, remoteName(d), limit)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, d, s.remote.Where())
	}
	b, err = verified(d, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.remote.Where(), err)
	}
	return b, nil
}

func (s *Store) hasRemote(d digest.Digest) bool {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	ok, err := s.remote.HasBlob(ctx, remoteName(d))
	return err == nil && ok
}
