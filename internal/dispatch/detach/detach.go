// Package detach runs dispatches under detached supervisors: `agora dispatch supervise ID`
// started in a session of its own, so the supervisor (and the worker it watches, which dies
// with it) outlives the process that started it: a `dispatch run --detach`, an MCP session or
// a restart of `agora orch serve`.
//
// [Supervisors] is the one place that starts them. The CLI and the MCP server call
// [Supervisors.Start] and return once the worker has started; the orchestrator calls
// [Supervisors.Watch], which also restarts a supervisor that exited before starting the
// worker, gives up after [MaxSpawns] of them, and has a started dispatch whose supervisor died
// reaped: recorded lost, or adopted by serve when its worker outlives its supervisor (a
// Kubernetes Job; dispatch.Adoption).
//
// It runs on the host side. It reads no file but /dev/null, and never the stage directory;
// it writes the supervisors' stderr to [LogFile] in the dispatch state directory.
package detach

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
)

// Records is what the supervisors read and write of the dispatch records;
// [*dispatch.Records] is one.
type Records interface {
	// Get returns the record of id, or an error wrapping [dispatch.ErrNotFound].
	Get(ctx context.Context, id string) (*dispatch.Record, error)
	// Supervisor returns the process recorded as supervising id and whether it still runs.
	Supervisor(ctx context.Context, id string) (sup string, alive bool, err error)
	// Finish moves a live dispatch to its terminal state; false when it had already ended.
	Finish(ctx context.Context, id string, o dispatch.Outcome) (bool, error)
}

// Reaper ends every live dispatch whose supervisor is gone and says how many it ended;
// [*dispatch.Dispatcher] is one.
type Reaper interface {
	Reap(ctx context.Context) (int, error)
}

// Supervisors starts and follows detached supervisors. Use it by pointer: it keeps when
// [Supervisors.Reap] last ran.
type Supervisors struct {
	// Bin is the agora binary, run as `Bin dispatch supervise ID`.
	Bin     string
	Records Records
	Reaper  Reaper
	// Standbys, when set, are warm standby supervisors: a dispatch of a warm target is
	// handed to a ready one instead of a supervisor started now.
	Standbys *Standbys
	// StateDir is the dispatch state directory (AGORA_HOME/dispatches), where the
	// supervisors' stderr goes ([LogFile]); "" leaves it on /dev/null.
	StateDir string
	// Poll is how often Watch reads a watched dispatch's record; zero means [DefaultPoll].
	Poll time.Duration

	// startWithin is how long Start waits for the worker to start; zero means a minute.
	// Only tests change it.
	startWithin time.Duration
	// reapedAt is when Reap last ran (unix nanoseconds).
	reapedAt atomic.Int64
}

// For returns the supervisors of d's dispatches.
func For(d *dispatch.Dispatcher) *Supervisors {
	return &Supervisors{Bin: d.AgoraBin, Records: d.Records, Reaper: d, StateDir: d.StateDir}
}

// ForServe returns the supervisors of a serve (agora orch serve, agora mcp): those of d's
// dispatches, holding the standby supervisors of d's warm targets when this process can
// ([NewStandbys]). stop discards the standbys not yet claimed; claimed ones run on.
func ForServe(ctx context.Context, d *dispatch.Dispatcher, log *slog.Logger) (sup *Supervisors, stop func(), err error) {
	sup = For(d)
	sb, err := NewStandbys(ctx, d, log)
	if err != nil {
		return nil, nil, err
	}
	if sb == nil {
		return sup, func() {}, nil
	}
	sup.Standbys = sb
	return sup, sb.Close, nil
}

// DefaultPoll is how often Watch reads a watched dispatch's record.
const DefaultPoll = 250 * time.Millisecond

// Start reads the record every startPollFast for its first startFast while a person or an MCP
// client waits (a warm standby's worker starts within a few ms), then every startPoll.
const (
	startPollFast = 5 * time.Millisecond
	startFast     = 250 * time.Millisecond
	startPoll     = 20 * time.Millisecond
)

// MaxSpawns bounds how often Watch starts a supervisor for one dispatch.
const MaxSpawns = 3

func (s *Supervisors) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return DefaultPoll
}

var (
	_ Records = (*dispatch.Records)(nil)
	_ Reaper  = (*dispatch.Dispatcher)(nil)
)
