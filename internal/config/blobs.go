package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Blobs says where patches, outputs, logs, transcripts and bundles are kept:
//
//	blobs:
//	  s3: {endpoint: https://s3.eu-west-1.amazonaws.com, bucket: team-agora, prefix: prod/, region: eu-west-1}
//
// Absent (the default), they stay in AGORA_HOME/blobs. Credentials never go in agora.yaml:
// they come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) in
// agora's environment, or from the file credentials_file names.
type Blobs struct {
	S3 *S3Location `yaml:"s3"`
}

// S3Location is a bucket and prefix of S3-compatible object storage.
type S3Location struct {
	// Endpoint is the server's http or https URL, scheme and host only (path-style requests).
	Endpoint string `yaml:"endpoint"`
	// Bucket is the bucket's name.
	Bucket string `yaml:"bucket"`
	// Prefix (optional) is prepended to every key, e.g. "prod/".
	Prefix string `yaml:"prefix"`
	// Region is the signing region (default us-east-1).
	Region string `yaml:"region"`
	// CredentialsFile (optional) is an absolute path to a mode-0600 file of
	// AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... lines; without it, the environment.
	CredentialsFile string `yaml:"credentials_file"`
	// Retention (anchors only) is how long each anchored checkpoint is kept under Object
	// Lock in COMPLIANCE mode, in days: "365d". Required for an anchor.
	Retention string `yaml:"retention"`
}

// maxRetentionDays caps an anchor's retention (100 years).
const maxRetentionDays = 36500

// ParseRetention reads a retention of whole days, "1d" to "36500d".
func ParseRetention(s string) (time.Duration, error) {
	n, ok := strings.CutSuffix(s, "d")
	if !ok || n == "" || len(n) > 5 || strings.TrimLeft(n, "0123456789") != "" {
		return 0, fmt.Errorf("retention %q: want whole days, e.g. 365d", truncate(s, 40))
	}
	days, _ := strconv.Atoi(n)
	if days < 1 || days > maxRetentionDays {
		return 0, fmt.Errorf("retention %q: want 1d to %dd", truncate(s, 40), maxRetentionDays)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// validateS3 checks a location's shape; the S3 client checks the rest when it is built.
func validateS3(pos *strictyaml.Positions, p string, l *S3Location, anchor bool) strictyaml.Errors {
	var errs strictyaml.Errors
	bad := func(field, format string, args ...any) {
		errs = append(errs, pos.Errorf(p+field, format, args...))
	}
	u, err := url.Parse(l.Endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad(".endpoint", "want an http or https URL, e.g. https://s3.eu-west-1.amazonaws.com")
	case u.User != nil:
		bad(".endpoint", "must not carry userinfo: credentials come from the environment or credentials_file, never agora.yaml")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "":
		bad(".endpoint", "want scheme and host only (agora uses path-style requests)")
	}
	if l.Bucket == "" {
		bad(".bucket", "a bucket name is required")
	}
	if l.CredentialsFile != "" && !filepath.IsAbs(l.CredentialsFile) {
		bad(".credentials_file", "must be an absolute path, got %q", l.CredentialsFile)
	}
	if anchor {
		if _, err := ParseRetention(l.Retention); err != nil {
			bad(".retention", "%v", err)
		}
	} else if l.Retention != "" {
		bad(".retention", "retention applies to an s3 anchor only, not to blobs or replicate")
	}
	return errs
}
