// Package audit is `agora audit`: the audit log of agora.db read (log), checkpointed
// (checkpoint) and exported as a bundle agora verify checks with no database (export). The
// checkpointer and its anchors come from the factory (the composition root builds them).
package audit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/outdir"
)

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read, checkpoint and export the audit log of agora.db",
		Long: `Every change to the catalog and every direct dispatch appends an entry to the audit log of
agora.db, in the same transaction as the change. The log is an RFC 6962 Merkle tree; signed
checkpoints of it (keys/audit.key) are written every audit.checkpoint_every entries or
audit.checkpoint_interval, and handed to the anchors of agora.yaml (audit.anchors).

'agora audit export' writes a bundle that 'agora verify' checks with no database.`,
	}
	cmd.AddCommand(newAuditLogCmd(f, nil), newAuditCheckpointCmd(f, nil), newAuditExportCmd(f, nil))
	return cmd
}

// checkpointNow writes a checkpoint of agora.db's audit log if it grew, and hands it to the
// anchors (an anchor's failure is in the result, not the error).
func checkpointNow(ctx context.Context, f *cmdutil.Factory) (*audit.Checkpointer, *audit.CheckpointResult, error) {
	cp, err := f.Checkpointer(ctx)
	if err != nil {
		return nil, nil, err
	}
	res, err := cp.Checkpoint(ctx)
	return cp, res, err
}

type auditLogOptions struct {
	cmdutil.PrintOptions
	list audit.ListOptions

	since string
	kind  string
	limit int
}

// auditLogEntry is the JSON shape of one entry of 'audit log'.
type auditLogEntry struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

func newAuditLogCmd(f *cmdutil.Factory, runF func(*auditLogOptions) error) *cobra.Command {
	opts := &auditLogOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := &cobra.Command{
		Use:   "log [--since T] [--kind K]",
		Short: "List the entries of the audit log",
		Long: `List audit entries in sequence order: SEQ TIME ACTOR KIND SUBJECT. --output json adds each
entry's details (names, hashes and decisions; never secret values).

--since takes an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (24h).
--kind takes a kind (catalog.register) or a family (catalog.*).`,
		Example: `  agora audit log --since 24h --kind 'catalog.*'
  agora audit log --limit 20 --output json`,
		Args: cmdutil.NoArgs,
	}
	cmd.Flags().StringVar(&opts.since, "since", "", "only entries at or after this RFC 3339 time or duration ago")
	cmd.Flags().StringVar(&opts.kind, "kind", "", "only entries of this kind, or family such as catalog.*")
	cmd.Flags().IntVar(&opts.limit, "limit", 0, "only the last N matching entries (0: all)")
	return cmdutil.NewPrintCmd(cmd, opts, runF, auditLogRun)
}

func (o *auditLogOptions) Validate(cmd *cobra.Command) error {
	if o.since != "" {
		t, err := parseSinceTime(o.since, o.F.Now())
		if err != nil {
			return cmdutil.UsageErrorf(cmd, "--since: %v", err)
		}
		o.list.Since = t
	}
	o.list.Kind, o.list.Limit = o.kind, o.limit
	return nil
}

func auditLogRun(ctx context.Context, opts *auditLogOptions) error {
	f := opts.F
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	recs, err := audit.List(ctx, h.DB.SQL(), opts.list)
	if err != nil {
		return err
	}
	out := make([]auditLogEntry, len(recs))
	for i, r := range recs {
		out[i] = auditLogEntry(r)
	}
	return cmdutil.Emit(f.IO, opts.Output, out, func(out []auditLogEntry) error {
		rows := make([][]string, len(out))
		for i, r := range out {
			rows[i] = []string{strconv.FormatUint(r.Seq, 10), cmdutil.FmtTime(f.IO, f.Now(), r.Time), r.Actor, r.Kind, r.Subject}
		}
		return cmdutil.PrintTable(f.IO, []string{"SEQ", "TIME", "ACTOR", "KIND", "SUBJECT"}, rows)
	})
}

// checkpointResult is the JSON shape of 'audit checkpoint'.
type checkpointResult struct {
	Origin  string         `json:"origin"`
	Size    uint64         `json:"size"`
	Root    string         `json:"root"`
	At      time.Time      `json:"at"`
	Created bool           `json:"created"`
	Note    string         `json:"note"`
	Anchors []anchorResult `json:"anchors"`
}

type anchorResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func newAuditCheckpointCmd(f *cmdutil.Factory, runF func(*cmdutil.PrintOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "checkpoint",
		Short: "Write a checkpoint now and print the latest signed checkpoint",
		Long: `Write a signed checkpoint of the audit log if it grew since the latest one (after checking
the latest one is a prefix of the log), hand it to every anchor that has not accepted it
yet, and print it: a C2SP tlog-checkpoint signed note.

A failing anchor does not undo the checkpoint; it is reported and the command exits 1.`,
		Example: `  agora audit checkpoint --output json`,
		Args:    cmdutil.NoArgs,
	}, &cmdutil.PrintOptions{F: f}, runF, auditCheckpointRun)
}

func auditCheckpointRun(ctx context.Context, opts *cmdutil.PrintOptions) error {
	f := opts.F
	_, res, err := checkpointNow(ctx, f)
	if err != nil {
		return err
	}
	c := res.Checkpoint
	if opts.Output == cmdutil.FormatJSON {
		out := checkpointResult{Origin: c.Origin, Size: c.Size, Root: base64.StdEncoding.EncodeToString(c.Hash),
			At: c.At, Created: res.Created, Note: string(c.Note), Anchors: []anchorResult{}}
		for _, a := range res.Anchors {
			r := anchorResult{Name: a.Name, OK: a.Err == nil}
			if a.Err != nil {
				r.Error = a.Err.Error()
			}
			out.Anchors = append(out.Anchors, r)
		}
		if err := cmdutil.WriteJSON(f.IO.Out, out); err != nil {
			return err
		}
	} else {
		if res.Created {
			fmt.Fprintf(f.IO.ErrOut, "agora: wrote checkpoint %d\n", c.Size)
		} else {
			fmt.Fprintf(f.IO.ErrOut, "agora: checkpoint %d is current\n", c.Size)
		}
		for _, a := range res.Anchors {
			if a.Err == nil {
				fmt.Fprintf(f.IO.ErrOut, "agora: anchored checkpoint %d: %s\n", c.Size, a.Name)
			}
		}
		fmt.Fprint(f.IO.Out, string(c.Note))
	}
	return res.Err()
}

type auditExportOptions struct {
	f      *cmdutil.Factory
	sel    audit.Selection
	out    string
	since  string
	kind   string
	force  bool
	output string
}

func newAuditExportCmd(f *cmdutil.Factory, runF func(*auditExportOptions) error) *cobra.Command {
	opts := &auditExportOptions{f: f}
	cmd := &cobra.Command{
		Use:   "export --out FILE [--since SEQ|TIME] [--kind K]",
		Short: "Export audit entries with their proofs as a bundle for agora verify",
		Long: `Write a bundle (docs/audit-bundle.md) of audit entries: each with its inclusion proof
against a signed checkpoint, the consistency proof to the latest anchored checkpoint, the
anchors' evidence and the public key. 'agora verify FILE' checks it with no database.

A checkpoint is written first if the log grew, so the bundle covers every entry. --since
takes a sequence number, an RFC 3339 time or a duration back from now; --kind a kind or a
family such as catalog.*.`,
		Example: `  agora audit export --out audit.json --since 24h
  agora verify audit.json --key ~/.local/share/agora/keys/audit.pub`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.out == "" {
				return cmdutil.UsageErrorf(cmd, "--out FILE is required")
			}
			if opts.since != "" {
				if n, err := strconv.ParseUint(opts.since, 10, 64); err == nil {
					opts.sel.FromIndex = n
				} else if opts.sel.Since, err = parseSinceTime(opts.since, f.Now()); err != nil {
					return cmdutil.UsageErrorf(cmd, "--since: want a sequence number, an RFC 3339 time or a duration, got %q", opts.since)
				}
			}
			opts.sel.Kind = opts.kind
			return cmdutil.RunCmd(cmd, opts, runF, auditExportRun)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "file to write the bundle to (required)")
	cmd.Flags().StringVar(&opts.since, "since", "", "first sequence number, or RFC 3339 time or duration ago")
	cmd.Flags().StringVar(&opts.kind, "kind", "", "only entries of this kind, or family such as catalog.*")
	cmd.Flags().BoolVar(&opts.force, "force", false, "overwrite --out if it exists")
	return cmd
}

func auditExportRun(ctx context.Context, opts *auditExportOptions) error {
	f, out := opts.f, opts.out
	if _, err := os.Lstat(out); err == nil && !opts.force {
		return fmt.Errorf("%s exists; pass --force to overwrite it", out)
	}
	cp, res, err := checkpointNow(ctx, f)
	if err != nil {
		return err
	}
	if aerr := res.Err(); aerr != nil {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: %v\n", strings.ReplaceAll(aerr.Error(), "\n", "; "))
	}
	b, err := cp.Export(ctx, opts.sel)
	if err != nil {
		if errors.Is(err, audit.ErrNoEntries) {
			return fmt.Errorf("%w; see 'agora audit log'", err)
		}
		return err
	}
	// Verify reads any number of entries but holds each other field whole: a bundle it
	// would refuse is not written, and the error names a narrower export that fits.
	if err := verify.CheckStreamable(b); err != nil {
		return fmt.Errorf("the bundle is not written, agora verify would refuse it: %w", err)
	}
	if err := writeBundle(out, b); err != nil {
		return err
	}
	anchored := "no anchored checkpoint"
	if b.Anchored != nil {
		anchored = fmt.Sprintf("%d anchor record(s)", len(b.Anchored.Evidence))
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: exported %d entries to %s (%s)\n", len(b.Entries), out, anchored)
	return nil
}

// writeBundle writes b to path by outdir.WriteFile's rule: a new 0600 file renamed over path, so a
// link planted there is replaced, never written through. auditExportRun has already
// refused an existing path without --force.
func writeBundle(path string, b *verify.Bundle) error {
	return outdir.WriteFile(path, true, func(w io.Writer) error { return verify.WriteBundle(w, b) })
}

// parseSinceTime reads an RFC 3339 time or a duration back from now.
func parseSinceTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration such as 24h, got %q", s)
}
