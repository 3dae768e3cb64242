// Package blob stores immutable content-addressed bytes under a directory
// (blobs/sha256/ab/<hex>). Writes are atomic (temp file, fsync, rename); every read re-verifies
// the hash, so a blob altered on disk is reported, never returned.
//
// blob runs on the host side. It never holds secrets: sealed secret values live in the database.
package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agora-dev/agora/internal/digest"
)

// ErrNotFound means no blob has the requested digest.
var ErrNotFound = errors.New("blob not found")

// IntegrityError reports a stored blob whose bytes no longer match its name.
type IntegrityError struct {
	Want, Got digest.Digest
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("blob %s is corrupt: its content hashes to %s", e.Want, e.Got)
}

// Store is a directory of blobs, or a bucket of them when opened with [OpenRemote]. It is safe
// for concurrent use by several processes.
type Store struct {
	dir    string
	remote Remote // nil: the local directory
}

// Open returns the store rooted at dir, creating it with mode 0700 if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("open blob store: %w", err)
	}
	return &Store{dir: dir}, nil
}

func (s *Store) path(d digest.Digest) string {
	h := d.Hex()
	return filepath.Join(s.dir, "sha256", h[:2], h)
}

// Put stores b and returns its digest. Storing bytes that are already present is a no-op.
func (s *Store) Put(b []byte) (digest.Digest, error) {
	d := digest.Sum(b)
	if s.remote != nil {
		return d, s.putRemote(d, b)
	}
	p := s.path(d)
	// An existing blob is touched, not rewritten: its time is when it was last stored, which a
	// retention purge checks so that a blob a new dispatch stores again (content addressing)
	// is not deleted under it (internal/retention). If a purge renamed it aside first, the
	// touch fails and the blob is written anew.
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return d, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		// Present but not ours to touch (another owner, a read-only mount): stored all the
		// same, as before the touch existed; a purge by this user cannot delete it either.
		if _, err := os.Stat(p); err == nil {
			return d, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := os.Chmod(tmp, 0o400); err != nil {
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("store blob %s: %w", d, err)
	}
	return d, nil
}

// Get returns the blob's bytes after checking they still hash to d. It refuses blobs larger
// than maxSize (0 means no limit) without reading them.
func (s *Store) Get(d digest.Digest, maxSize int64) ([]byte, error) {
	if _, err := digest.Parse(string(d)); err != nil {
		return nil, err
	}
	if s.remote != nil {
		return s.getRemote(d, maxSize)
	}
	f, err := os.Open(s.path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	if maxSize > 0 && st.Size() > maxSize {
		return nil, fmt.Errorf("blob %s is %d bytes, over the %d-byte limit", d, st.Size(), maxSize)
	}
	// Read into one buffer of the blob's size and hash it whole: io.Copy through a
	// MultiWriter allocated a 32 KiB copy buffer on every read, and a dispatch reads its
	// subagent and capabilities five to seven times. A blob is never rewritten
	// (0400, named by its digest); whatever is read is verified all the same.
	//
	// At most one byte past the size checked above is read: a file that grows after the
	// check (it is not agora's own 0400 blob, or not a regular file) is refused, never read
	// to its end past maxSize (note30).
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + 1)
	if _, err := buf.ReadFrom(io.LimitReader(f, st.Size()+1)); err != nil {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	if int64(buf.Len()) != st.Size() {
		return nil, fmt.Errorf("read blob %s: it changed size while read (%d bytes at the check)", d, st.Size())
	}
	return verified(d, buf.Bytes())
}

// verified returns b when it hashes to d, else an [*IntegrityError].
func verified(d digest.Digest, b []byte) ([]byte, error) {
	sum := sha256.Sum256(b)
	if got := digest.FromSum(sum[:]); got != d {
		return nil, &IntegrityError{Want: d, Got: got}
	}
	return b, nil
}

// Has reports whether the blob is present (without verifying it).
func (s *Store) Has(d digest.Digest) bool {
	if s.remote != nil {
		return s.hasRemote(d)
	}
	_, err := os.Stat(s.path(d))
	return err == nil
}
