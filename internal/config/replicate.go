package config

import (
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
}

// DefaultReplicateLag is replicate.lag when the config names none.
const DefaultReplicateLag = time.Second

// LagOrDefault is Lag, or [DefaultReplicateLag] when unset.
func (r Replicate) LagOrDefault() time.Duration {
	if r.Lag == 0 {
		return DefaultReplicateLag
	}
	return r.Lag
}

func validateReplicate(pos *strictyaml.Positions, r *Replicate) strictyaml.Errors {
	var errs strictyaml.Errors
	if r.S3 == nil {
		if r.Lag != 0 {
			errs = append(errs, pos.Errorf("replicate.lag", "a lag without replicate.s3: name the bucket to replicate to"))
		}
		return errs
	}
	errs = append(errs, validateS3(pos, "replicate.s3", r.S3, false)...)
	if r.Lag != 0 && (r.Lag < 100*time.Millisecond || r.Lag > time.Hour) {
		errs = append(errs, pos.Errorf("replicate.lag", "want 100ms to 1h, got %s", r.Lag))
	}
	return errs
}
