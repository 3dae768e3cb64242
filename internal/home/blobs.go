package home

import (
	"fmt"
	"os"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/s3"
)

// S3Client builds the client of an agora.yaml S3 location: credentials from its
// credentials_file or the environment, requests through the egress policy of egress:
// (allow_private lets an in-network endpoint through). It makes no request.
func S3Client(cfg *config.Config, l *config.S3Location) (*s3.Client, error) {
	creds, err := s3.LoadCredentials(l.CredentialsFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	prefixes, err := cfg.Egress.Prefixes()
	if err != nil {
		return nil, fmt.Errorf("egress.allow_private: %w", err)
	}
	return s3.New(s3.Config{Endpoint: l.Endpoint, Bucket: l.Bucket, Prefix: l.Prefix, Region: l.Region},
		creds, egress.Policy{AllowPrivate: prefixes})
}

// remoteBlobs is the blob store blobs.s3 configures, or nil when it configures none.
func remoteBlobs(cfg *config.Config) (*blob.Store, error) {
	if cfg.Blobs.S3 == nil {
		return nil, nil
	}
	c, err := S3Client(cfg, cfg.Blobs.S3)
	if err != nil {
		return nil, fmt.Errorf("blobs.s3: %w", err)
	}
	return blob.OpenRemote(s3.Blobs{C: c}), nil
}
