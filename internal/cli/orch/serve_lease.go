package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lease"
	"github.com/agora-dev/agora/internal/lease/fencefile"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/store"
)

// leaderFenceFile, in the home, is where a leading serve mirrors its fence for the processes
// it starts (fencefile).
const leaderFenceFile = "leader.fence"

// serveLeader is serve's leadership when agora.yaml has leader:, nil otherwise.
type serveLeader struct{ l *lease.Leader }

// electServe waits as a standby until this serve holds agora.yaml's leader Lease, then fences
// every commit of this process with it (store.SetFence), for the rest of the process's life:
// once leadership ends the fence stays shut, so nothing the process does after serve (the
// command's closing checkpoint) commits either. Without leader: it returns nil at
// once and no Kubernetes client is made. It reads agora.yaml without opening agora.db: a
// standby writes nothing.
func electServe(ctx context.Context, f *cmdutil.Factory, logFormat string) (*serveLeader, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	if err := f.RequireHome(); err != nil {
		return nil, err
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	lc := cfg.Leader
	if !lc.Set() {
		return nil, nil
	}
	id, err := lc.IdentityOrDefault()
	if err != nil {
		return nil, err
	}
	log, err := obs.NewLogger(f.IO.ErrOut, logFormat, slog.LevelWarn)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: standby: waiting for the leader lease %s/%s as %q\n", lc.Namespace, lc.Lease, id)
	l, err := lease.Elect(ctx, lease.Config{Name: lc.Lease, Namespace: lc.Namespace, Kubeconfig: lc.Kubeconfig,
		Identity: id, Duration: lc.DurationOrDefault(), Log: log.With("lease", lc.Namespace+"/"+lc.Lease)})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: leader: holding lease %s as %q (previous holder %q)\n", l.Name(), id, l.Previous)
	store.SetFence(l.Fence.Check)
	// The processes serve starts (detached supervisors, warm standbys) write the same
	// databases and act on the same cluster: they keep this fence through a file in the home
	// (fencefile), which a process started without it could not be told of. Without the
	// file serve does not lead: a child it started would be unfenced.
	w, err := fencefile.Create(filepath.Join(dir, leaderFenceFile), l.Fence.Valid())
	if err != nil {
		l.Release()
		return nil, fmt.Errorf("lease %s: %w", l.Name(), err)
	}
	l.Fence.Publish(w)
	fencefile.SetInherited(w.Env())
	return &serveLeader{l: l}, nil
}

// recordAcquired writes leader.acquired to agora.db before serve serves.
func (s *serveLeader) recordAcquired(ctx context.Context, f *cmdutil.Factory, h *home.Home, restored bool) error {
	if s == nil {
		return nil
	}
	return s.record(ctx, f, h, entry.LeaderAcquired, map[string]any{"previous": s.l.Previous, "restored": restored})
}

func (s *serveLeader) record(ctx context.Context, f *cmdutil.Factory, h *home.Home, kind string, details map[string]any) error {
	details["identity"] = s.l.Identity()
	e := audit.Entry{Actor: "system", Kind: kind, Subject: entry.Lease(s.l.Namespace(), s.l.LeaseName()), Details: details}
	return h.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(f.Now).Append(ctx, tx, e)
		return err
	})
}

// lost is closed when the Lease is lost; nil (never closed) without leader:.
func (s *serveLeader) lost() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.l.Lost()
}

// errLost is serve's error once the Lease is lost: it stops, never keeps serving.
func (s *serveLeader) errLost() error {
	return fmt.Errorf("lease %s: %w as %q: stopped serving (the fence refuses every commit; another replica leads)", s.l.Name(), lease.ErrLost, s.l.Identity())
}

// stopped is serve's error when its parts stopped with err: once the fence is shut or past its
// deadline, whichever part noticed first (a refused commit, the elector), serve says it lost
// the lease.
func (s *serveLeader) stopped(err error) error {
	if s == nil || err == nil || s.l.Fence.Check() == nil {
		return err
	}
	if errors.Is(err, lease.ErrLost) {
		return err
	}
	return fmt.Errorf("%w; first refused: %v", s.errLost(), err)
}

// release ends leadership after serve stopped: leader.released is recorded while the fence
// still passes (a clean stop), then the fence is shut and the Lease handed back. A leader
// that lost the Lease records nothing (the fence refuses).
func (s *serveLeader) release(ctx context.Context, f *cmdutil.Factory, h *home.Home) {
	if s == nil {
		return
	}
	if h != nil && s.l.Fence.Check() == nil {
		if err := s.record(context.WithoutCancel(ctx), f, h, entry.LeaderReleased, map[string]any{}); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "agora: warning: record leader.released: %v\n", err)
		}
	}
	s.l.Release()
	fmt.Fprintf(f.IO.ErrOut, "agora: leader: lease %s given up (pid %d)\n", s.l.Name(), os.Getpid())
}

// leaderHome elects serve (see [electServe]), restores the home from the replica when
// replicate.s3 is set (serve_takeover.go), and opens it; a new leader records
// leader.acquired before anything serves.
func leaderHome(ctx context.Context, f *cmdutil.Factory, logFormat string) (*serveLeader, *home.Home, error) {
	leader, err := electServe(ctx, f, logFormat)
	if err != nil {
		return nil, nil, err
	}
	var restored bool
	if leader != nil {
		restored, err = takeoverRestore(ctx, f)
	}
	var h *home.Home
	if err == nil {
		h, err = f.Home(ctx)
	}
	if err == nil {
		err = leader.recordAcquired(ctx, f, h, restored)
	}
	if err != nil {
		leader.release(ctx, f, nil)
		return nil, nil, err
	}
	return leader, h, nil
}
