package cli

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

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/store"
)

// restoreKeys are the files of keys/ a restore needs from the operator: they are never
// replicated (the bucket must not hold the signing and sealing keys).
var restoreKeys = []string{home.SecretKeyFile, home.AuditKeyFile, home.AuditPubFile, home.CallbackKey}

type restoreOptions struct {
	cmdutil.PrintOptions
	to, config, keys, at string
}

// restoreResult is what `agora restore` prints.
type restoreResult struct {
	Home      string                `json:"home"`
	Databases []replicate.Restored  `json:"databases"`
	Anchors   []restoreAnchorResult `json:"anchors"`
}

type restoreAnchorResult struct {
	Log    string `json:"log"`
	Anchor string `json:"anchor"`
	// Size is the newest anchored checkpoint's, 0 when the anchor holds none.
	Size uint64 `json:"size"`
	// LogSize is the restored log's.
	LogSize uint64 `json:"log_size"`
}

func newRestoreCmd(f *cmdutil.Factory, runF func(*restoreOptions) error) *cobra.Command {
	opts := &restoreOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "restore --to DIR --config AGORA_YAML --keys KEYS_DIR",
		Short: "Bring back a home from its replica in object storage",
		Long: `Bring back AGORA_HOME after a lost disk from the replica that 'agora orch serve' and
'agora mcp serve' keep in object storage (replicate.s3 in agora.yaml): agora.db and
orch/orch.db, as of the last second before the loss (or --at TIME).

A restore needs, from the operator, what is never replicated: the agora.yaml (--config) and
the keys (--keys: a copy of keys/ holding secret.key, audit.key, audit.pub and callback.key,
kept apart from the bucket). Bucket credentials come as for serve: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY in the environment, or replicate.s3.credentials_file.

Every replica object is checked (its checksum, its place in the chain, the home it names:
audit.pub's key); a damaged or missing one is an error, never a short restore. Then each
restored audit log is checked against the newest checkpoint of each s3 anchor in agora.yaml:
it must verify under audit.pub and be a prefix of the log. A log shorter than an anchor (an
older copy served by the bucket) fails the restore, and the restored databases are removed.
DIR must not exist or be empty; it becomes the new AGORA_HOME. Blobs are not restored: keep
them in object storage too (blobs.s3).`,
		Example: `  AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... agora restore --to /var/lib/agora/home \
      --config /backup/agora.yaml --keys /backup/keys
  agora restore --to /tmp/home-at-noon --config agora.yaml --keys keys --at 2026-11-24T12:00:00Z -o json`,
		Args: cmdutil.NoArgs,
	}, opts, runF, restoreRun)
	fl := cmd.Flags()
	fl.StringVar(&opts.to, "to", "", "the new home: a directory that does not exist or is empty (required)")
	fl.StringVar(&opts.config, "config", "", "the home's agora.yaml, with replicate.s3 (required)")
	fl.StringVar(&opts.keys, "keys", "", "a copy of the home's keys/ directory (required)")
	fl.StringVar(&opts.at, "at", "", "restore the state as of this RFC 3339 time instead of the newest")
	return cmd
}

func (o *restoreOptions) Validate(cmd *cobra.Command) error {
	for _, fl := range []struct{ name, v string }{{"--to", o.to}, {"--config", o.config}, {"--keys", o.keys}} {
		if fl.v == "" {
			return cmdutil.UsageErrorf(cmd, "%s is required", fl.name)
		}
	}
	if o.at != "" {
		if _, err := time.Parse(time.RFC3339Nano, o.at); err != nil {
			return cmdutil.UsageErrorf(cmd, "--at %q: want an RFC 3339 time, e.g. 2026-11-24T12:00:00Z", o.at)
		}
	}
	return nil
}

func restoreRun(ctx context.Context, o *restoreOptions) error {
	res, err := restoreHome(ctx, o)
	if err != nil {
		return err
	}
	return cmdutil.Emit(o.F.IO, o.Output, res, func(r restoreResult) error { return printRestore(o.F.IO.Out, r) })
}

// restoreHome restores into o.to (which must not exist or be empty) the home of o.config and
// o.keys from its replica: the restore of `agora restore` and of a standby serve taking over
// the leader lease (orch_serve_takeover.go).
func restoreHome(ctx context.Context, o *restoreOptions) (restoreResult, error) {
	var res restoreResult
	dir, err := filepath.Abs(o.to)
	if err != nil {
		return res, err
	}
	if err := emptyDir(dir); err != nil {
		return res, err
	}
	var at time.Time
	if o.at != "" {
		at, _ = time.Parse(time.RFC3339Nano, o.at)
	}
	src, err := cmdutil.ReadLimited(o.config, 1<<20)
	if err != nil {
		return res, fmt.Errorf("--config: %w", err)
	}
	cfg := config.Default(dir)
	if err := config.Parse(o.config, src, cfg); err != nil {
		return res, err
	}
	if cfg.Replicate.S3 == nil {
		return res, fmt.Errorf("--config %s has no replicate.s3: there is no replica to restore from", o.config)
	}
	keys := map[string][]byte{}
	for _, k := range restoreKeys {
		b, err := cmdutil.ReadLimited(filepath.Join(o.keys, filepath.Base(k)), 64<<10)
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
			Key: replicate.SegmentKey(keys[home.SecretKeyFile]), Path: db.path, At: at})
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
	anchors, err := restoreCheckAnchors(ctx, o.F, dir, cfg, res.Databases)
	if err != nil {
		removeDBs()
		return res, fmt.Errorf("the restored home does not verify against its anchors, so its databases were removed: %w", err)
	}
	res.Anchors = anchors
	return res, nil
}

// restoreCheckAnchors checks each restored audit log against the newest checkpoint of every s3
// anchor the config names for it: `agora verify` semantics (the checkpoint verifies under the
// home's key, and the log holds it as a prefix), so a log an older replica brought back, shorter
// than what was anchored, fails.
func restoreCheckAnchors(ctx context.Context, f *cmdutil.Factory, dir string, cfg *config.Config, restored []replicate.Restored) ([]restoreAnchorResult, error) {
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
	if err := restoreMissingAnchored(ctx, f, cfg, restored); err != nil {
		return nil, err
	}
	var out []restoreAnchorResult
	for _, r := range restored {
		logName := r.DB + ".db"
		db := h.DB
		if r.DB == "orch" {
			if db, err = store.Open(ctx, filepath.Join(dir, home.OrchDir, home.OrchDB), orch.Migrations(), store.FullSync()); err != nil {
				return nil, err
			}
			defer db.Close()
		}
		cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: logName, Signer: signer, VerifierKey: string(pub), Now: f.Now})
		if err != nil {
			return nil, err
		}
		logSize, err := audit.TreeSize(ctx, db.SQL())
		if err != nil {
			return nil, err
		}
		for i, a := range cfg.Audit.Anchors {
			if a.Type != config.AnchorS3 {
				continue
			}
			an, err := s3Anchor(cfg, a.S3, logName, f.Now)
			if err != nil {
				return nil, fmt.Errorf("audit.anchors[%d]: %w", i, err)
			}
			latest, err := an.Latest(ctx)
			if err != nil {
				return nil, err
			}
			row := restoreAnchorResult{Log: logName, Anchor: an.Name(), LogSize: logSize}
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

// restoreMissingAnchored refuses a restore without orch.db when an s3 anchor holds a checkpoint
// of orch.db's log: the home had an orchestrator, and a bucket that lost (or a hostile owner
// who deleted) that replica must not make it look as if none ever served it.
func restoreMissingAnchored(ctx context.Context, f *cmdutil.Factory, cfg *config.Config, restored []replicate.Restored) error {
	for _, r := range restored {
		if r.DB == "orch" {
			return nil
		}
	}
	for i, a := range cfg.Audit.Anchors {
		if a.Type != config.AnchorS3 {
			continue
		}
		an, err := s3Anchor(cfg, a.S3, home.OrchDB, f.Now)
		if err != nil {
			return fmt.Errorf("audit.anchors[%d]: %w", i, err)
		}
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

func printRestore(w io.Writer, r restoreResult) error {
	fmt.Fprintf(w, "restored %s\n", r.Home)
	for _, d := range r.Databases {
		fmt.Fprintf(w, "  %s.db: generation %s, segment %d, as of %s (%d pages)\n", d.DB, d.Generation, d.Seq, d.Time.Format(time.RFC3339Nano), d.Pages)
		for _, s := range d.Skipped {
			fmt.Fprintf(w, "    passed over the newer generation %s\n", s)
		}
	}
	for _, a := range r.Anchors {
		if a.Size == 0 {
			fmt.Fprintf(w, "  %s (%d entries): %s holds no checkpoint yet\n", a.Log, a.LogSize, a.Anchor)
			continue
		}
		fmt.Fprintf(w, "  %s (%d entries): holds checkpoint %d anchored in %s\n", a.Log, a.LogSize, a.Size, a.Anchor)
	}
	if len(r.Anchors) == 0 {
		fmt.Fprintln(w, "  no s3 anchor configured: the restored logs were not checked against anchored checkpoints")
	}
	_, err := fmt.Fprintln(w, "start serve with AGORA_HOME="+r.Home+"; blobs come from blobs.s3 (a local blobs/ directory was not restored)")
	return err
}
