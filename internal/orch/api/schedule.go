package api

import "time"

// Schedule is a standing order: run a plan at every slot of a cron spec in a zone.
type Schedule struct {
	Name string `json:"name"`
	Spec string `json:"spec"` // five cron fields or a descriptor such as @daily
	Zone string `json:"zone"` // the IANA zone the fields are read in
	// PlanName, PlanDigest and Queue are the stored plan's; its subagents, env bundles and
	// workspace are looked up again at each slot.
	PlanName   string `json:"plan_name"`
	PlanDigest string `json:"plan_digest"`
	Queue      string `json:"queue"`
	Tasks      int    `json:"tasks"`
	// Workspace and Revision are what the person who added it named (resolved to a commit
	// at each slot); "" when the plan names its own or none.
	Workspace string    `json:"workspace,omitempty"`
	Revision  string    `json:"revision,omitempty"`
	Actor     string    `json:"actor"` // who added it
	CreatedAt time.Time `json:"created_at"`
	// LastSlot is the latest slot that fired (LastRun its run) or was refused (LastError why:
	// its plan no longer validated); NextDue the next slot, absent when there is none.
	LastSlot  *time.Time `json:"last_slot,omitempty"`
	LastRun   string     `json:"last_run,omitempty"`
	LastError string     `json:"last_error,omitempty"`
	NextDue   *time.Time `json:"next_due,omitempty"`
	// Runs are its runs, newest slot first (show only).
	Runs []ScheduleRun `json:"runs,omitempty"`
}

// ScheduleRun is one run a schedule started.
type ScheduleRun struct {
	ID     string    `json:"id"` // NAME@SLOT
	State  string    `json:"state"`
	Slot   time.Time `json:"slot"`
	Missed int       `json:"missed,omitempty"` // earlier slots coalesced into it
}

// Schedules is the list of schedules, by name.
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}

// ScheduleRequest adds a schedule: its name, spec, zone and plan (validated, catalog
// references too, before anything is stored).
type ScheduleRequest struct {
	Name      string `json:"name"`
	Spec      string `json:"spec"`
	Zone      string `json:"zone,omitempty"` // "" is UTC
	File      string `json:"file"`
	Source    []byte `json:"source"`
	Workspace string `json:"workspace,omitempty"` // NAME or NAME@sha256:HEX; the plan's own must agree
	Revision  string `json:"revision,omitempty"`
	Actor     string `json:"actor"`
}

// ScheduleRemoveRequest removes a schedule.
type ScheduleRemoveRequest struct {
	Actor string `json:"actor"`
}
