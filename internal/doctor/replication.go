package doctor

import (
	"fmt"
	"time"
)

// Replication is one database's replication to object storage (replicate.s3) as the
// serve replicating it last published it.
type Replication struct {
	DB string // "agora.db", "orch.db"
	// Published is false when no serve of this home has published a status.
	Published  bool
	Generation string
	Seq        uint64
	// Replicated is when the last snapshot known to be in the bucket was read.
	Replicated time.Time
	// Err is the last upload's error, "" when it succeeded.
	Err string
	// Lag is replicate.lag; Now the time of the check.
	Lag time.Duration
	Now time.Time
}

// staleLags is how many lags behind replication may be before doctor fails its row.
const staleLags = 10

const replicationFix = "run 'agora orch serve' (or 'agora mcp serve') with replicate.s3 set, check its log for 'replicate' warnings, and the bucket's row above; see docs/operations.md#replication-and-restore-a-lost-disk"

// replication reports each database's last replicated position and how old it is; not
// required: a dispatch runs without it.
func (r *run) replication(o Options) {
	for _, x := range o.Replication {
		name := "replication " + x.DB
		if !x.Published {
			r.ok(name, "not replicated yet: orch serve and mcp serve replicate while they run", false)
			continue
		}
		age := x.Now.Sub(x.Replicated).Round(time.Millisecond)
		where := fmt.Sprintf("generation %s, segment %d, replicated %s ago (lag %s)", x.Generation, x.Seq, age, x.Lag)
		switch {
		case x.Err != "":
			r.missing(name, where+"; the last upload failed: "+x.Err, replicationFix, false)
		case age > staleLags*x.Lag:
			r.missing(name, where+": more than ten lags behind; is serve running?", replicationFix, false)
		default:
			r.ok(name, where, false)
		}
	}
}
