package orch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/replicate/homerestore"
)

// takeoverDir is where a new leader restores the replica before moving its databases into
// the home; it is removed before and after.
const takeoverDir = ".takeover"

// takeoverRestore is step one of a serve that took the leader lease with replicate.s3 set: the
// home's agora.db and orch.db are replaced by the replica's (what the previous leader last
// shipped; it has been fenced since, so the replica is the newest state there is), restored
// and checked as `agora restore` does (segments, chain, identity, anchors). The replicas
// share agora.yaml, keys/ and blobs.s3; only the databases move. It reports false when the
// bucket holds no replica yet (the first leader ever keeps its home), and is always done on
// taking the Lease, even from no one or from this identity: a home never serves older state
// than the bucket's.
func takeoverRestore(ctx context.Context, f *cmdutil.Factory) (bool, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return false, err
	}
	cfg, err := config.Load(dir)
	if err != nil || cfg.Replicate.S3 == nil {
		return false, err
	}
	staging := filepath.Join(dir, takeoverDir)
	if err := os.RemoveAll(staging); err != nil {
		return false, err
	}
	defer os.RemoveAll(staging)
	res, err := homerestore.Run(ctx, homerestore.Options{To: staging, Config: filepath.Join(dir, config.FileName), Keys: filepath.Join(dir, home.KeyDir),
		Anchors: f.S3Anchors, Now: f.Now})
	if errors.Is(err, replicate.ErrNoReplica) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take over: restore the home from its replica: %w", err)
	}
	for _, db := range []string{home.DBFile, filepath.Join(home.OrchDir, home.OrchDB)} {
		if err := replaceDB(filepath.Join(staging, db), filepath.Join(dir, db)); err != nil {
			return false, fmt.Errorf("take over: %w", err)
		}
	}
	for _, d := range res.Databases {
		fmt.Fprintf(f.IO.ErrOut, "agora: leader: restored %s.db from the replica (generation %s, segment %d, as of %s)\n", d.DB, d.Generation, d.Seq, d.Time.Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return true, nil
}

// replaceDB moves the restored database src over dst, dropping dst's WAL and shared memory
// first (they belong to the old file). A src the restore did not make (no replica of orch.db)
// removes dst: the home holds what the bucket holds.
func replaceDB(src, dst string) error {
	for _, p := range []string{dst + "-wal", dst + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	err := os.Rename(src, dst)
	if errors.Is(err, fs.ErrNotExist) { // no src: the bucket held no replica of it
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return err
}
