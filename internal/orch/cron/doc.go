// Package cron owns the orchestrator's schedules: a person's standing order to run a plan at
// the slots of a cron spec read in a time zone. It parses and checks specs (standard 5-field
// specs and the @hourly-style descriptors, through github.com/robfig/cron/v3, which it wraps
// so that bad input is an error and never a panic or a spec that never fires), computes slots
// (the due slots since the last one fired, coalesced into the latest), and keeps the
// schedules table of orch.db, every change with its audit entry in the same transaction.
//
// It runs on the host side, inside `agora orch serve`. It never submits a run: the service's
// scheduler does, through the engine, then marks the slot fired here (submit, then mark: a
// crash between them submits the same run id again, which the engine answers with the run it
// has). It links the IANA time zone database (time/tzdata) as a fallback, so a schedule's
// zone loads on a host without /usr/share/zoneinfo; the system's database wins when present.
package cron
