package gc

import (
	"fmt"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
)

// With leader: in agora.yaml the replicas share blobs.s3 and the replica bucket, and
// each has a home of its own: a standby's is stale, an old leader's is fenced. A purge decided
// from either would delete shared objects the serving leader's home still names (a blob a
// newer dispatch shares, a replica generation a restore needs) and commit to a home no one
// serves. So with leader: set, only the process holding the Lease deletes: the leading `orch
// serve`'s background sweep, under its fence (every commit and every delete asks it first).
// `agora gc` never holds the Lease (taking it would stop the serve that leads), so it plans
// (--dry-run) and refuses the rest; `agora mcp` does not sweep.

// gcLeaderError is `agora gc` refused because agora.yaml sets leader:.
type gcLeaderError struct{ lease string }

func (e *gcLeaderError) Error() string {
	return fmt.Sprintf("gc: agora.yaml sets leader: (lease %s): only the orch serve holding the Lease purges shared objects; refusing to delete or commit from this process", e.lease)
}

func (e *gcLeaderError) Hint() string {
	return "the leading 'agora orch serve' sweeps every hour (and at start); 'agora gc --dry-run' shows what it would purge"
}

// refuseGCOffLeader is gc's rule under leader: (see above): nil for a dry run or without
// leader:, else the refusal. It reads agora.yaml only: nothing is opened, nothing committed.
func refuseGCOffLeader(f *cmdutil.Factory, dryRun bool) error {
	if dryRun {
		return nil
	}
	dir, err := f.HomeDir()
	if err != nil {
		return err
	}
	if err := f.RequireHome(); err != nil {
		return err
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return err
	}
	if !cfg.Leader.Set() {
		return nil
	}
	return &gcLeaderError{lease: cfg.Leader.Namespace + "/" + cfg.Leader.Lease}
}
