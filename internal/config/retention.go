package config

import (
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Retention says how long the products of ended dispatches are kept before `agora gc` and
// serve's background sweep purge them (internal/retention):
//
//	retention: {blobs: 90d, logs: 30d, runs: 180d}
//
// Each is whole days ("1d" to "36500d") counted from the dispatch's (or run's) end. Absent (the
// default), nothing is purged. blobs covers a dispatch's patch, outputs, input and the copies
// of upstream products it mounted; logs covers its stdout, stderr and transcript; runs covers
// a sealed orchestrator run's rows in orch.db. The audit logs, checkpoints, anchors and
// catalog are never purged.
type Retention struct {
	// Blobs is how long a dispatch's patch, outputs and inputs are kept, e.g. "90d".
	Blobs string `yaml:"blobs"`
	// Logs is how long a dispatch's stdout, stderr and transcript are kept, e.g. "30d".
	Logs string `yaml:"logs"`
	// Runs is how long a sealed orchestrator run's rows stay in orch.db after it ended, e.g.
	// "180d".
	Runs string `yaml:"runs"`
}

// RetentionPolicy is [Retention] parsed: a zero duration keeps that class forever.
type RetentionPolicy struct {
	Blobs, Logs, Runs time.Duration
}

// Set reports whether anything is ever purged.
func (p RetentionPolicy) Set() bool { return p.Blobs > 0 || p.Logs > 0 || p.Runs > 0 }

// Policy parses r. An empty field keeps forever; anything else is [ParseRetention]'s whole
// days, so "0d", "-1d", "90" and "1h" are errors, never "purge everything now".
func (r Retention) Policy() (RetentionPolicy, error) {
	var p RetentionPolicy
	for _, f := range []struct {
		v   string
		dst *time.Duration
	}{{r.Blobs, &p.Blobs}, {r.Logs, &p.Logs}, {r.Runs, &p.Runs}} {
		if f.v == "" {
			continue
		}
		d, err := ParseRetention(f.v)
		if err != nil {
			return RetentionPolicy{}, err
		}
		*f.dst = d
	}
	return p, nil
}

// validateRetention checks each field on its own so both errors are reported with their line.
func validateRetention(pos *strictyaml.Positions, r Retention) strictyaml.Errors {
	var errs strictyaml.Errors
	for _, f := range []struct{ key, v string }{{"blobs", r.Blobs}, {"logs", r.Logs}, {"runs", r.Runs}} {
		if f.v == "" {
			continue
		}
		if _, err := ParseRetention(f.v); err != nil {
			errs = append(errs, pos.Errorf("retention."+f.key, "%v", err))
		}
	}
	return errs
}
