package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/store"
)

// The checkpointer and the anchors agora.yaml configures: the composition root builds them
// for the factory (NewFactory), for serve's orch.db and for restore.

// checkpointer returns the checkpointer of agora.db's audit log with the anchors of
// agora.yaml. Commands that append entries call MaybeCheckpoint on it after they commit.
func checkpointer(ctx context.Context, f *cmdutil.Factory) (*audit.Checkpointer, error) {
	h, err := f.Home(ctx)
	if err != nil {
		return nil, err
	}
	return checkpointerFor(ctx, f, h.DB, home.DBFile)
}

// checkpointerFor is the checkpointer of the log in db, named logName in its origin.
func checkpointerFor(ctx context.Context, f *cmdutil.Factory, db *store.DB, logName string) (*audit.Checkpointer, error) {
	h, err := f.Home(ctx)
	if err != nil {
		return nil, err
	}
	signer, err := h.AuditSigner()
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(filepath.Join(h.Dir, home.AuditPubFile))
	if err != nil {
		return nil, fmt.Errorf("read audit public key: %w", err)
	}
	anchors, err := buildAnchors(h.Config, logName, f.Now)
	if err != nil {
		return nil, err
	}
	anchors = anchorsAfterReplica(h, logName, anchors)
	return audit.NewCheckpointer(db, audit.CheckpointerOptions{
		LogName:     logName,
		Signer:      signer,
		VerifierKey: string(pub),
		Every:       h.Config.Audit.Every(),
		Interval:    h.Config.Audit.Interval(),
		Anchors:     anchors,
		Now:         f.Now,
	})
}

// buildAnchors builds the anchors agora.yaml configures for the log logName. A file anchor
// keeps one log's checkpoints per file, so the logs other than agora.db append to the
// configured path plus ".<log>" (orch.db: "/mnt/worm/agora.anchor.orch").
func buildAnchors(cfg *config.Config, logName string, now func() time.Time) ([]audit.Anchor, error) {
	var out []audit.Anchor
	for i, a := range cfg.Audit.Anchors {
		switch a.Type {
		case config.AnchorFile:
			path := a.Path
			if logName != home.DBFile {
				path += "." + strings.TrimSuffix(logName, ".db")
			}
			out = append(out, anchor.NewFile(path, now))
		case config.AnchorCommand:
			c, err := anchor.NewCommand(a.Argv, now)
			if err != nil {
				return nil, fmt.Errorf("audit.anchors[%d]: %w", i, err)
			}
			out = append(out, c)
		case config.AnchorRFC3161:
			var ca []byte
			if a.CAFile != "" {
				b, err := cmdutil.ReadLimited(a.CAFile, cmdutil.MaxCAFileSize)
				if err != nil {
					return nil, fmt.Errorf("audit.anchors[%d].ca_file: %w", i, err)
				}
				ca = b
			}
			prefixes, err := cfg.Egress.Prefixes()
			if err != nil {
				return nil, fmt.Errorf("egress.allow_private: %w", err)
			}
			r, err := anchor.NewRFC3161(a.URL, ca, egress.Policy{AllowPrivate: prefixes})
			if err != nil {
				return nil, fmt.Errorf("audit.anchors[%d]: %w", i, err)
			}
			out = append(out, r)
		case config.AnchorS3:
			a, err := s3Anchor(cfg, a.S3, logName, now)
			if err != nil {
				return nil, fmt.Errorf("audit.anchors[%d]: %w", i, err)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// s3Anchors are the s3 anchors of cfg for the log logName, in audit.anchors' order.
func s3Anchors(cfg *config.Config, logName string, now func() time.Time) ([]*anchor.S3, error) {
	var out []*anchor.S3
	for i, a := range cfg.Audit.Anchors {
		if a.Type != config.AnchorS3 {
			continue
		}
		an, err := s3Anchor(cfg, a.S3, logName, now)
		if err != nil {
			return nil, fmt.Errorf("audit.anchors[%d]: %w", i, err)
		}
		out = append(out, an)
	}
	return out, nil
}

// s3Anchor builds the s3 anchor of the log logName ("agora.db" -> anchors/agora/).
func s3Anchor(cfg *config.Config, l *config.S3Location, logName string, now func() time.Time) (*anchor.S3, error) {
	retention, err := config.ParseRetention(l.Retention)
	if err != nil {
		return nil, err
	}
	c, err := home.S3Client(cfg, l)
	if err != nil {
		return nil, err
	}
	return anchor.NewS3(c, strings.TrimSuffix(logName, ".db"), retention, now)
}
