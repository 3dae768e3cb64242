// Package restore is `agora restore`: a lost home rebuilt into a new directory from its replica
// in object storage (internal/replicate) and the operator's copy of its keys, each restored
// audit log checked against the newest checkpoint of every s3 anchor agora.yaml names.
package restore

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/replicate/homerestore"
)

type restoreOptions struct {
	cmdutil.PrintOptions
	to, config, keys, at string
}

func NewCmd(f *cmdutil.Factory, runF func(*restoreOptions) error) *cobra.Command {
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

// restore is the restore the options ask for (Validate checked --at).
func (o *restoreOptions) restore() homerestore.Options {
	var at time.Time
	if o.at != "" {
		at, _ = time.Parse(time.RFC3339Nano, o.at)
	}
	return homerestore.Options{To: o.to, Config: o.config, Keys: o.keys, At: at, Anchors: o.F.S3Anchors, Now: o.F.Now}
}

func restoreRun(ctx context.Context, o *restoreOptions) error {
	res, err := homerestore.Run(ctx, o.restore())
	if err != nil {
		return err
	}
	return cmdutil.Emit(o.F.IO, o.Output, res, func(r homerestore.Result) error { return printRestore(o.F.IO.Out, r) })
}

func printRestore(w io.Writer, r homerestore.Result) error {
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
