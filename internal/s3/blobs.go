package s3

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Blobs is the blob store's view of a client (blob.Remote): objects under "blobs/" below the
// prefix.
type Blobs struct{ C *Client }

// Where names the bucket and prefix.
func (b Blobs) Where() string { return b.C.Where() + " (blobs/)" }

// PutBlob writes name under blobs/.
func (b Blobs) PutBlob(ctx context.Context, name string, data []byte) error {
	_, err := b.C.Put(ctx, "blobs/"+name, data, false, nil)
	return err
}

// GetBlob reads name under blobs/; found is false when the object does not exist.
func (b Blobs) GetBlob(ctx context.Context, name string, max int64) ([]byte, bool, error) {
	data, _, err := b.C.Get(ctx, "blobs/"+name, "", max)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// HasBlob reports whether name exists under blobs/.
func (b Blobs) HasBlob(ctx context.Context, name string) (bool, error) {
	_, err := b.C.Head(ctx, "blobs/"+name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PurgeBlob deletes name under blobs/ unless it was written at or after notAfter (fresh: a
// Put rewrites the object, so a blob stored again is seen). gone is false when it was already
// absent. The check and the delete are two requests: a Put between them
// is lost (S3 has no conditional delete on time); the retention sweep's cut-off makes that
// window a blob stored by a dispatch that started during the sweep's own two requests.
func (b Blobs) PurgeBlob(ctx context.Context, name string, notAfter time.Time) (gone, fresh bool, err error) {
	info, err := b.C.Head(ctx, "blobs/"+name)
	if errors.Is(err, ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if info.LastModified.IsZero() {
		return false, false, fmt.Errorf("%s: the server gave no Last-Modified for blobs/%s; left in place", b.Where(), name)
	}
	// Last-Modified is whole seconds: a write in notAfter's second may show as before it.
	if !info.LastModified.Add(time.Second).Before(notAfter) {
		return false, true, nil
	}
	if err := b.C.Delete(ctx, "blobs/"+name, ""); err != nil {
		return false, false, err
	}
	return true, false, nil
}
