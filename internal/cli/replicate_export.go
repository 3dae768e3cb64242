package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/replicate"
)

// A kubernetes dispatch's pod outlives its leader; the next leader restores the home from the
// replica and adopts the pod only if the replica holds what the pod's token opens: the
// dispatch's record and its gateway session (agora.db), and the task's attempt (orch.db).
// orch.db and agora.db are shipped by two replicators, each on its own tick: a Job made
// between a session's commit and the next look of agora.db's replicator would run a pod
// that no restored home knows, and the next leader would start the task again under the
// same id and fail it (it finds the Job, but not the session to take back). So, while a
// serve replicates the home, a Start gets its session (and makes its Job) only once both
// replicas hold every commit made before the export returned. A replica that does not
// catch up within the wait fails the Start (provider-failed, nothing made): fail closed.

// replicaWaits are the waits of a Start on h's replicas: orch.db's (the attempt commits
// before the dispatch's accept) and agora.db's (the accept and the session); none when h
// does not replicate.
func replicaWaits(h *home.Home) []replicatedFirst {
	if h.Config.Replicate.S3 == nil {
		return nil
	}
	lag := h.Config.Replicate.LagOrDefault()
	dbs := []struct{ name, path string }{
		{"orch", filepath.Join(h.Dir, home.OrchDir, home.OrchDB)},
		{"agora", filepath.Join(h.Dir, home.DBFile)},
	}
	out := make([]replicatedFirst, 0, len(dbs))
	for _, db := range dbs {
		out = append(out, replicatedFirst{status: filepath.Join(h.Dir, db.name+"-"+replicate.PublishedFile), lock: db.path + "-replicate.lock",
			wait: replicaWaitFloor + replicaWaitLags*lag, poll: min(lag/4, 50*time.Millisecond)})
	}
	return out
}

// replicatedExporter is the gateway's registry whose exports return only once the replicas
// hold them (see above). Reattach and Revoke are the registry's own.
type replicatedExporter struct {
	*netgw.Registry
	waits []replicatedFirst
}

// exporterFor wraps reg when waits are set.
func exporterFor(reg *netgw.Registry, waits []replicatedFirst) remote.Exporter {
	if len(waits) == 0 {
		return reg
	}
	return replicatedExporter{Registry: reg, waits: waits}
}

func (x replicatedExporter) Export(ctx context.Context, s compute.Spec) (*remote.Session, error) {
	sess, err := x.Registry.Export(ctx, s)
	return x.replicated(ctx, sess, err)
}

func (x replicatedExporter) ExportIf(ctx context.Context, s compute.Spec, held func(context.Context) error) (*remote.Session, error) {
	sess, err := x.Registry.ExportIf(ctx, s, held)
	return x.replicated(ctx, sess, err)
}

// replicated hands sess over once every replica holds what was committed before now; else it
// closes sess (revoking its token) and fails.
func (x replicatedExporter) replicated(ctx context.Context, sess *remote.Session, err error) (*remote.Session, error) {
	if err != nil {
		return sess, err
	}
	since := time.Now()
	for _, w := range x.waits {
		if werr := w.replicated(ctx, since); werr != nil {
			if sess != nil && sess.Close != nil {
				werr = errors.Join(werr, sess.Close())
			}
			return nil, fmt.Errorf("the dispatch's gateway session is not in the replica yet, so no pod is made (a leader that took over could not adopt it): %w", werr)
		}
	}
	return sess, nil
}

// agoraReplicated is the orchestrator's wait for agora.db's replica
// (dispatchexec.Executor.Replicated); nil when h does not replicate.
func agoraReplicated(h *home.Home) func(context.Context, time.Time) error {
	for _, w := range replicaWaits(h) {
		if filepath.Base(w.status) == "agora-"+replicate.PublishedFile {
			return w.replicated
		}
	}
	return nil
}
