package config

import (
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Defaults of the audit section. The zero values in [Audit] mean these.
const (
	DefaultCheckpointEvery    = 100
	DefaultCheckpointInterval = 10 * time.Minute
)

// Anchor types accepted in audit.anchors.
const (
	AnchorFile    = "file"
	AnchorRFC3161 = "rfc3161"
	AnchorCommand = "command"
	AnchorS3      = "s3"
)

// Audit configures the audit logs' checkpoints and anchors:
//
//	audit:
//	  checkpoint_every: 100        # entries
//	  checkpoint_interval: 10m
//	  anchors:
//	    - {type: file, path: /mnt/worm/agora.anchor}
//	    - {type: rfc3161, url: https://tsa.example.com/tsr, ca_file: /etc/agora/tsa-ca.pem}
//	    - {type: command, argv: [/usr/local/bin/upload-checkpoint, --bucket, audit]}
//	    - s3: {endpoint: https://s3.example.com, bucket: audit, prefix: agora/, retention: 365d}
type Audit struct {
	// CheckpointEvery writes a checkpoint once this many entries were appended since the
	// last one. Default 100; 0 means the default.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// CheckpointInterval writes a checkpoint once this long has passed since the last one,
	// if any entry was appended. Default 10m; 0 means the default.
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	// Anchors receive every checkpoint. Empty (the default) keeps checkpoints in the
	// database only: tamper-detecting against anyone without the database and key.
	Anchors []Anchor `yaml:"anchors"`
}

// Anchor is one entry of audit.anchors. Type selects which other fields apply.
type Anchor struct {
	// Type is file, rfc3161, command or s3 (which may be left out when s3 is given).
	Type string `yaml:"type"`
	// S3 (s3) is the Object Lock bucket each checkpoint is written to, as an object in
	// COMPLIANCE mode retained for S3.Retention.
	S3 *S3Location `yaml:"s3"`
	// Path (file) is the absolute path of the file checkpoints are appended to. It SHOULD
	// be on other storage than AGORA_HOME.
	Path string `yaml:"path"`
	// URL (rfc3161) is the time-stamping authority's http or https URL.
	URL string `yaml:"url"`
	// CAFile (rfc3161, optional) is an absolute path to PEM certificates the TSA must chain
	// to; without it the system roots are used.
	CAFile string `yaml:"ca_file"`
	// Argv (command) is the program and its arguments; argv[0] is an absolute path. The
	// checkpoint arrives on standard input; the standard output is kept as the receipt.
	Argv []string `yaml:"argv"`
}

// Every is CheckpointEvery with its default applied.
func (a Audit) Every() int {
	if a.CheckpointEvery <= 0 {
		return DefaultCheckpointEvery
	}
	return a.CheckpointEvery
}

// Interval is CheckpointInterval with its default applied.
func (a Audit) Interval() time.Duration {
	if a.CheckpointInterval <= 0 {
		return DefaultCheckpointInterval
	}
	return a.CheckpointInterval
}

// validateAudit checks the audit section and returns every problem found.
func validateAudit(pos *strictyaml.Positions, a *Audit) strictyaml.Errors {
	var errs strictyaml.Errors
	if a.CheckpointEvery < 0 {
		errs = append(errs, pos.Errorf("audit.checkpoint_every", "must not be negative, got %d", a.CheckpointEvery))
	}
	seen := map[string]string{}
	for i := range a.Anchors {
		an := &a.Anchors[i]
		p := "audit.anchors[" + strconv.Itoa(i) + "]"
		if an.Type == "" && an.S3 != nil {
			an.Type = AnchorS3
		}
		bad := func(field, format string, args ...any) {
			errs = append(errs, pos.Errorf(p+field, format, args...))
		}
		var key string
		switch an.Type {
		case AnchorFile:
			if !filepath.IsAbs(an.Path) {
				bad(".path", "a file anchor needs an absolute path, got %q", an.Path)
			}
			if an.URL != "" || an.CAFile != "" || len(an.Argv) > 0 || an.S3 != nil {
				bad("", "a file anchor takes only path")
			}
			key = "file:" + filepath.Clean(an.Path)
		case AnchorRFC3161:
			u, err := url.Parse(an.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(".url", "an rfc3161 anchor needs an http or https URL")
			} else if u.User != nil {
				bad(".url", "the URL must not carry userinfo")
			}
			if an.CAFile != "" && !filepath.IsAbs(an.CAFile) {
				bad(".ca_file", "must be an absolute path, got %q", an.CAFile)
			}
			if an.Path != "" || len(an.Argv) > 0 {
				bad("", "an rfc3161 anchor takes only url and ca_file")
			}
			key = "rfc3161:" + an.URL
		case AnchorCommand:
			if len(an.Argv) == 0 || !filepath.IsAbs(an.Argv[0]) {
				bad(".argv", "a command anchor needs argv with an absolute program path first (agora does not search PATH)")
			}
			if an.Path != "" || an.URL != "" || an.CAFile != "" {
				bad("", "a command anchor takes only argv")
			}
			if len(an.Argv) > 0 {
				key = "command:" + strconv.Quote(an.Argv[0])
				for _, arg := range an.Argv[1:] {
					key += " " + strconv.Quote(arg)
				}
			}
		case AnchorS3:
			if an.S3 == nil {
				bad(".s3", "an s3 anchor needs s3: {endpoint, bucket, prefix, region, retention}")
				continue
			}
			if an.Path != "" || an.URL != "" || an.CAFile != "" || len(an.Argv) > 0 {
				bad("", "an s3 anchor takes only s3")
			}
			errs = append(errs, validateS3(pos, p+".s3", an.S3, true)...)
			key = "s3:" + an.S3.Endpoint + "/" + an.S3.Bucket + "/" + an.S3.Prefix
		default:
			bad(".type", "want file, rfc3161, command or s3, got %q", an.Type)
			continue
		}
		if first, dup := seen[key]; dup && key != "" {
			bad("", "the same anchor as %s", first)
		}
		seen[key] = p
	}
	return errs
}
