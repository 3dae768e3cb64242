// Package homerestore brings back a home from its replica in object storage: agora.db and
// orch.db restored (internal/replicate checks every object), the operator's agora.yaml and
// keys beside them, and each restored audit log checked against the newest checkpoint of
// every s3 anchor. agora restore makes a new home with it; a standby orch serve that takes the
// leader Lease restores its own home's databases with it first.
package homerestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/store"
)

// Options are what a restore needs from the operator: what is never replicated.
type Options struct {
	// To is the new home: a directory that does not exist or is empty.
	To string
	// Config is the home's agora.yaml, with replicate.s3; Keys a copy of its keys/.
	Config, Keys string
	// At restores the state as of this time; zero: the newest.
	At time.Time
	// Anchors are the s3 anchors a config names for an audit log ("agora.db", "orch.db").
	Anchors func(cfg *config.Config, logName string) ([]*anchor.S3, error)
	// Now stamps the checkpointer that checks the restored logs.
	Now func() time.Time
}

// keyFiles are the files of keys/ a restore needs from the operator: they are never
// replicated (the bucket must not hold the signing and sealing keys).
var keyFiles = []string{home.SecretKeyFile, home.AuditKeyFile, home.AuditPubFile, home.CallbackKey}

// Result is what a restore brought back, as `agora restore` prints it.
type Result struct {
	Home      string               `json:"home"`
	Databases []replicate.Restored `json:"databases"`
	Anchors   []AnchorResult       `json:"anchors"`
}

// AnchorResult is one restored log checked against one s3 anchor.
type AnchorResult struct {
	Log    string `json:"log"`
	Anchor string `json:"anchor"`
	// Size is the newest anchored checkpoint's, 0 when the anchor holds none.
	Size uint64 `json:"size"`
	// LogSize is the restored log's.
	LogSize uint64 `json:"log_size"`
}

// Run restores into o.To (which must not exist or be empty) the home of o.Config and o.Keys
// from its replica.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	dir, err := filepath.Abs(o.To)
	if err != nil {
		return res, err
	}
	if err := emptyDir(dir); err != nil {
		return res, err
	}
	src, err := capped.ReadFile(o.Config, 1<<20)
	if err != nil {
		return res, fmt.Errorf("--config: %w", err)
	}
	cfg := config.Default(dir)
	if err := config.Parse(o.Config, src, cfg); err != nil {
		return res, err
	}
	if cfg.Replicate.S3 == nil {
		return res, fmt.Errorf("--config %s has no replicate.s3: there is no replica to restore from", o.Config)
	}
	keys := map[string][]byte{}
	for _, k := range keyFiles {
		b, err := capped.ReadFile(filepath.Join(o.Keys, filepath.Base(k)), 64<<10)
		if err != nil {
			return res, fmt.Errorf("--keys: %w (a restore needs secret.key, audit.key, audit.pub and callback.key)", err)
		}
		keys[k] = b
	}
	identity := strings.TrimSpace(string(keys[home.AuditPubFile]))
	c, err := home.S3Client(cfg, cfg.Replicate.S3)
	if err != nil {
		return res, fmt.Errorf("replicate.s3: %w", err)
	}
	// The home: mode 0700, its keys and agora.yaml first, then the databases.
	for _, d := range []string{dir, filepath.Join(dir, home.KeyDir), filepath.Join(dir, home.OrchDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return res, err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return res, err
		}
	}
	for k, b := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
			return res, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, config.FileName), src, 0o600); err != nil {
		return res, err
	}
	res.Home = dir
	dbs := []struct{ name, path string }{{"agora", filepath.Join(dir, home.DBFile)}, {"orch", filepath.Join(dir, home.OrchDir, home.OrchDB)}}
	// A failed restore leaves no database: a home with agora.db and without the orch.db it had
	// would start as if no orchestrator had ever served it.
	removeDBs := func() {
		for _, db := range dbs {
			os.Remove(db.path)
		}
	}
	for _, db := range dbs {
		r, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: db.name, Identity: identity,
			Key: replicate.SegmentKey(keys[home.SecretKeyFile]), Path: db.path, At: o.At})
		if db.name == "orch" && errors.Is(err, replicate.ErrNoReplica) {
			continue // no orchestrator ever served this home
		}
		if err != nil && len(res.Databases) > 0 {
			removeDBs()
			return res, fmt.Errorf("%w; %s.db, restored before it, was removed", err, res.Databases[0].DB)
		}
		if err != nil {
			return res, err
		}
		res.Databases = append(res.Databases, r)
	}
	anchors, err := checkAnchors(ctx, o, dir, cfg, res.Databases)
	if err != nil {
		removeDBs()
		return res, fmt.Errorf("the restored home does not verify against its anchors, so its databases were removed: %w", err)
	}
	res.Anchors = anchors
	return res, nil
}

// checkAnchors checks each restored audit log against the newest checkpoint of every s3
// anchor the config names for it: `agora verify` semantics (the checkpoint verifies under the
// home's key, and the log holds it as a prefix), so a log an older replica brought back, shorter
// than what was anchored, fails.
func checkAnchors(ctx context.Context, o Options, dir string, cfg *config.Config, restored []replicate.Restored) ([]AnchorResult, error) {
	h, err := home.OpenExisting(ctx, dir, agoradb.Migrations())
	if err != nil {
		return nil, err
	}
	defer h.Close()
	signer, err := h.AuditSigner()
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	if err != nil {
		return nil, err
	}
	if err := missingAnchored(ctx, o, cfg, restored); err != nil {
		return nil, err
	}
	var out []AnchorResult
	for _, r := range restored {
		logName := r.DB + ".db"
		db := h.DB
		if r.DB == "orch" {
			if db, err = store.Open(ctx, filepath.Join(dir, home.OrchDir, home.OrchDB), orch.Migrations(), store.FullSync()); err != nil {
				return nil, err
			}
			defer db.Close()
		}
		cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: logName, Signer: signer, VerifierKey: string(pub), Now: o.Now})
		if err != nil {
			return nil, err
		}
		logSize, err := audit.TreeSize(ctx, db.SQL())
		if err != nil {
			return nil, err
		}
		anchors, err := o.Anchors(cfg, logName)
		if err != nil {
			return nil, err
		}
		for _, an := range anchors {
			latest, err := an.Latest(ctx)
			if err != nil {
				return nil, err
			}
			row := AnchorResult{Log: logName, Anchor: an.Name(), LogSize: logSize}
			if latest != nil {
				if row.Size, err = cp.CheckHeld(ctx, an.Name(), latest); err != nil {
					return nil, fmt.Errorf("%s: %w", logName, err)
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// missingAnchored refuses a restore without orch.db when an s3 anchor holds a checkpoint
// of orch.db's log: the home had an orchestrator, and a bucket that lost (or a hostile owner
// who deleted) that replica must not make it look as if none ever served it.
func missingAnchored(ctx context.Context, o Options, cfg *config.Config, restored []replicate.Restored) error {
	for _, r := range restored {
		if r.DB == "orch" {
			return nil
		}
	}
	anchors, err := o.Anchors(cfg, home.OrchDB)
	if err != nil {
		return err
	}
	for _, an := range anchors {
		latest, err := an.Latest(ctx)
		if err != nil {
			return err
		}
		if latest != nil {
			return fmt.Errorf("orch.db: the bucket holds no replica of it, but %s holds a checkpoint of its audit log: the replica was lost or deleted, and a home without orch.db would start as if no orchestrator had ever served it", an.Name())
		}
	}
	return nil
}

// emptyDir refuses a directory that exists and holds anything.
func emptyDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		return fmt.Errorf("--to %s is not empty: restore into a new or empty directory", dir)
	}
	return nil
}
