package s3

import (
	"context"
	"errors"
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
