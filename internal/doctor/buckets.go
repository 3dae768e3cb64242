package doctor

import "context"

// Bucket is an S3 bucket agora.yaml names (blobs.s3, an s3 anchor), with the probe that asks
// its server whether it exists and agora's credentials may use it.
type Bucket struct {
	// Name is the check's name: "blobs bucket", "anchor bucket 0".
	Name string
	// Where names it for people: "s3://bucket/prefix/ at host".
	Where string
	// Check is nil with Err set when the client could not be built (credentials missing).
	Check func(ctx context.Context) error
	Err   error
}

func (r *run) buckets(o Options) {
	for _, b := range o.Buckets {
		err := b.Err
		if err == nil {
			err = b.Check(r.ctx)
		}
		if err != nil {
			r.missing(b.Name, err.Error(), "create the bucket, or fix agora.yaml and the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or credentials_file); see docs/operations.md#object-storage", true)
			continue
		}
		r.ok(b.Name, b.Where+" answers and accepts agora's credentials", true)
	}
}
