package config

import (
	"cmp"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Replicate ships agora.db and orch.db to S3-compatible object storage as they change, so a
// lost disk loses at most the last lag of work (`agora restore` brings the home back):
//
//	replicate:
//	  s3: {endpoint: https://s3.eu-west-1.amazonaws.com, bucket: team-agora, prefix: prod/, region: eu-west-1}
//	  lag: 1s
//
// `agora orch serve` and `agora mcp serve` replicate while they run (one process per database
// at a time). Credentials come as for blobs.s3 (the environment or credentials_file). The
// signing and sealing keys are not replicated: the operator keeps keys/ elsewhere.
type Replicate struct {
	S3 *S3Location `yaml:"s3"`
	// Lag bounds how long a commit waits before it is in the bucket (default 1s, 100ms to 1h).
	Lag time.Duration `yaml:"lag"`
	// KeepGenerations is how many whole generations of each database the retention sweep and
	// `agora gc` keep (1 to 1000); older ones are deleted. 0 (the default) keeps every one.
	KeepGenerations int `yaml:"keep_generations"`
}

// maxKeepGenerations bounds replicate.keep_generations: each kept generation is read (its
// first sync) at every sweep.
const maxKeepGenerations = 1000

// DefaultReplicateLag is replicate.lag when the config names none.
const DefaultReplicateLag = time.Second

// LagOrDefault is Lag, or [DefaultReplicateLag] when unset.
func (r Replicate) LagOrDefault() time.Duration {
	return cmp.Or(r.Lag, DefaultReplicateLag)
}

func validateReplicate(pos *strictyaml.Positions, r *Replicate) strictyaml.Errors {
	var errs strictyaml.Errors
	if r.S3 == nil {
		if r.Lag != 0 {
			errs = append(errs, pos.Errorf("replicate.lag", "a lag without replicate.s3: name the bucket to replicate to"))
		}
		if r.KeepGenerations != 0 {
			errs = append(errs, pos.Errorf("replicate.keep_generations", "without replicate.s3: name the bucket to prune"))
		}
		return errs
	}
	if r.KeepGenerations < 0 || r.KeepGenerations > maxKeepGenerations {
		errs = append(errs, pos.Errorf("replicate.keep_generations", "want 1 to %d (0 or absent keeps every generation), got %d", maxKeepGenerations, r.KeepGenerations))
	}
	errs = append(errs, validateS3(pos, "replicate.s3", r.S3, false)...)
	if r.Lag != 0 && (r.Lag < 100*time.Millisecond || r.Lag > time.Hour) {
		errs = append(errs, pos.Errorf("replicate.lag", "want 100ms to 1h, got %s", r.Lag))
	}
	return errs
}
