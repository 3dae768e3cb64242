package retention_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/s3"
)

// TestS3_PurgeOnVersitygw: on a real S3 server (versitygw, scripts/s3-tools.sh), an aged-out
// patch is recorded and deleted from the bucket; a blob a newer dispatch shares stays; a blob
// stored again (Last-Modified) after the oldest live dispatch began is left for the next sweep.
func TestS3_PurgeOnVersitygw(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	h := newHome(t)
	h.blobs = blob.OpenRemote(s3Blobs(srv.Client(t, cfg)))
	// The bucket stamps objects with the real time, so this sweep's clock is the real one.
	clock := time.Now().Add(5 * time.Minute)
	at := func(days int) string { return clock.Add(-time.Duration(days) * 24 * time.Hour).Format(ts) }
	put := func(s string) digest.Digest {
		d, err := h.blobs.Put([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	old, shared, input := put("old patch"), put("shared bytes"), put("an input")
	h.insert(t, disp{id: "old", state: "finished", ended: at(100), input: input, patch: old, outputs: map[string]digest.Digest{"x": shared}})
	h.insert(t, disp{id: "new", state: "finished", ended: at(1), input: input, patch: shared})
	s := &retention.Sweeper{DB: h.db, OrchDB: filepath.Join(h.dir, "orch.db"), Blobs: h.blobs, Policy: policy, Log: h.log,
		Now: func() time.Time { return clock }}
	plan, res, err := s.Run(context.Background(), "alice", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 1 || plan.Items[0].Digest != old || res.Deleted != 1 {
		t.Fatalf("plan %+v result %+v: want only the old patch purged", plan.Items, res)
	}
	obj := func(d digest.Digest) string {
		return filepath.Join(srv.Dir, cfg.Bucket, "agora", "blobs", "sha256", d.Hex()[:2], d.Hex())
	}
	if _, err := os.Stat(obj(old)); !os.IsNotExist(err) {
		t.Fatalf("the purged object is still in the bucket: %v", err)
	}
	for _, d := range []digest.Digest{shared, input} {
		if !h.blobs.Has(d) {
			t.Errorf("%s, which the new dispatch names, is gone from the bucket", d)
		}
	}

	// A live dispatch began an hour before the sweep; an old dispatch's blob was stored again
	// since (by it, say): the bucket's Last-Modified keeps it.
	again := put("stored again")
	h.insert(t, disp{id: "old2", state: "finished", ended: at(100), input: input, patch: again})
	h.insert(t, disp{id: "live", state: "started", created: clock.Add(-time.Hour).Format(ts), input: input})
	_, res, err = s.Run(context.Background(), "alice", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deferred != 1 || !h.blobs.Has(again) {
		t.Fatalf("result %+v: the blob stored after the live dispatch began must stay", res)
	}
}

func s3Blobs(c *s3.Client) s3.Blobs { return s3.Blobs{C: c} }
