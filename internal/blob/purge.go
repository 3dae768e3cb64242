package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agora-dev/agora/internal/digest"
)

// ErrFresh means a blob was written or stored again at or after the purge's cut-off: someone
// may need it, so it was left in place.
var ErrFresh = errors.New("blob was stored again recently; left in place")

// ErrNotRegular means the blob's path is not agora's own regular file (a symlink or a
// directory planted in the store): it is left in place, never followed.
var ErrNotRegular = errors.New("not a regular file; left in place")

// Purger is a [Remote] that can delete a blob: PurgeBlob deletes name unless it was last
// written at or after notAfter (fresh, left in place); gone is false when it was absent.
type Purger interface {
	PurgeBlob(ctx context.Context, name string, notAfter time.Time) (gone, fresh bool, err error)
}

// tombSuffix names a blob being purged: never a digest, so never read as one.
const tombSuffix = ".purge"

// Purge deletes blob d unless it was stored (or stored again: [Store.Put] touches an existing
// blob) at or after notAfter. gone is false when it was already absent.
//
// On disk the blob is first renamed aside and its time checked again there: a Put that
// touched it before the rename is seen and the blob put back; a Put after the rename finds
// no file and writes it anew. Between the two, a reader of d finds it absent.
func (s *Store) Purge(ctx context.Context, d digest.Digest, notAfter time.Time) (gone bool, err error) {
	if _, err := digest.Parse(string(d)); err != nil {
		return false, err
	}
	if s.remote != nil {
		pr, ok := s.remote.(Purger)
		if !ok {
			return false, fmt.Errorf("purge blob %s: %s cannot delete", d, s.remote.Where())
		}
		ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
		defer cancel()
		gone, fresh, err := pr.PurgeBlob(ctx, remoteName(d), notAfter)
		switch {
		case err != nil:
			return false, fmt.Errorf("purge blob %s: %w", d, err)
		case fresh:
			return false, ErrFresh
		}
		return gone, nil
	}
	p := s.path(d)
	if err := s.checkDirs(p); err != nil {
		return false, fmt.Errorf("purge blob %s: %w", d, err)
	}
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		// A purge that crashed after its rename left the blob aside: finish it.
		if err := os.Remove(p + tombSuffix); err == nil {
			return true, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("purge blob %s: %w", d, err)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("purge blob %s: %w", d, err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("purge blob %s: %s is %v: %w", d, p, st.Mode().Type(), ErrNotRegular)
	}
	if !st.ModTime().Before(notAfter) {
		return false, ErrFresh
	}
	tomb := p + tombSuffix
	if err := os.Rename(p, tomb); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("purge blob %s: %w", d, err)
	}
	st, err = os.Lstat(tomb)
	if err != nil {
		return false, fmt.Errorf("purge blob %s: %w", d, err)
	}
	if !st.ModTime().Before(notAfter) {
		if err := s.Restore(d); err != nil {
			return false, err
		}
		return false, ErrFresh
	}
	if err := os.Remove(tomb); err != nil {
		return false, fmt.Errorf("purge blob %s: %w", d, err)
	}
	return true, nil
}

// Restore puts back blob d if a purge renamed it aside and did not finish (a crash between
// the rename and the check). It is a no-op otherwise, and on a remote store.
func (s *Store) Restore(d digest.Digest) error {
	if s.remote != nil {
		return nil
	}
	p := s.path(d)
	tomb := p + tombSuffix
	if _, err := os.Lstat(tomb); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Link fails when a Put wrote the blob anew meanwhile: the same bytes, so either copy is it.
	if err := os.Link(tomb, p); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("restore blob %s: %w", d, err)
	}
	if err := os.Remove(tomb); err != nil {
		return fmt.Errorf("restore blob %s: %w", d, err)
	}
	return nil
}

// checkDirs refuses a blob whose directories are not the store's own: a symlink planted as
// sha256/ or sha256/ab/ would make a purge rename and delete files elsewhere.
func (s *Store) checkDirs(p string) error {
	for _, dir := range []string{filepath.Join(s.dir, "sha256"), filepath.Dir(p)} {
		st, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is %v: %w", dir, st.Mode().Type(), ErrNotRegular)
		}
	}
	return nil
}
