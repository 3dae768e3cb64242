package config

import (
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Resident configures the resident dispatcher: the first `agora dispatch run` of a home
// with no `agora orch serve` starts `agora dispatch resident` in the background, and later
// ones hand their dispatches to it (agora.db open, keys loaded, warm slots kept), as they
// would to serve:
//
//	resident: {idle: 10m}
//
// Idle is how long it waits with no dispatch before it exits; "0" turns it off, so every
// `agora dispatch run` supervises its dispatch itself. Absent, 10m.
type Resident struct {
	Idle string `yaml:"idle"`
}

// DefaultResidentIdle is a resident's idle time when agora.yaml says none.
const DefaultResidentIdle = 10 * time.Minute

// maxResidentIdle bounds idle: a resident is a convenience, not a service (that is serve).
const maxResidentIdle = 24 * time.Hour

// IdleFor is r.Idle parsed: 0 when the resident is off.
func (r Resident) IdleFor() (time.Duration, error) {
	if r.Idle == "" {
		return DefaultResidentIdle, nil
	}
	if r.Idle == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(r.Idle)
	switch {
	case err != nil:
		return 0, fmt.Errorf("resident.idle %q: want a duration such as 10m, or 0 for no resident dispatcher", r.Idle)
	case d < 0 || d > maxResidentIdle:
		return 0, fmt.Errorf("resident.idle %s: want 0 (off) up to %s", d, maxResidentIdle)
	}
	return d, nil
}

func validateResident(pos *strictyaml.Positions, r Resident) strictyaml.Errors {
	if _, err := r.IdleFor(); err != nil {
		return strictyaml.Errors{pos.Errorf("resident.idle", "%v", err)}
	}
	return nil
}
