package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/store"
)

// replicaDB is one database a serve replicates: its name in the bucket and its file.
type replicaDB struct{ name, path string }

// replication is the replicators one serve runs. Each database is replicated by one process at
// a time (orch serve and mcp serve may both hold agora.db): a serve takes the database's lock
// file (DB-replicate.lock beside it) or, while another holds it, tries again every lag.
type replication struct {
	h    *home.Home
	log  *slog.Logger
	mu   sync.Mutex
	reps map[string]*replicate.Replicator
	wg   sync.WaitGroup
}

// serveReplication is the factory's ServeReplication: agora.db and the orch.db at orchDB
// replicated while agora orch serve runs. Its metrics are nil without replicate.s3.
func serveReplication(ctx context.Context, h *home.Home, log *slog.Logger, orchDB string) (prometheus.Collector, func(), error) {
	r, wait, err := startReplication(ctx, h, log, agoraReplica(h), replicaDB{"orch", orchDB})
	if err != nil || r == nil {
		return nil, wait, err
	}
	return r, wait, nil
}

// startReplication starts replicating dbs when agora.yaml has replicate.s3, until ctx ends;
// wait (after ctx ends) ships the last changes and returns. Without replicate.s3 it does nothing.
func startReplication(ctx context.Context, h *home.Home, log *slog.Logger, dbs ...replicaDB) (r *replication, wait func(), err error) {
	rc := h.Config.Replicate
	if rc.S3 == nil {
		return nil, func() {}, nil
	}
	c, err := home.S3Client(h.Config, rc.S3)
	if err != nil {
		return nil, nil, fmt.Errorf("replicate.s3: %w", err)
	}
	pub, err := os.ReadFile(filepath.Join(h.Dir, home.AuditPubFile))
	if err != nil {
		return nil, nil, fmt.Errorf("replicate: read the home's audit key (its identity in the bucket): %w", err)
	}
	secret, err := os.ReadFile(filepath.Join(h.Dir, home.SecretKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("replicate: read the home's secret key (it authenticates the replica): %w", err)
	}
	r = &replication{h: h, log: log, reps: map[string]*replicate.Replicator{}}
	lag := rc.LagOrDefault()
	for _, db := range dbs {
		o := replicate.Options{Client: c, DB: db.name, Path: db.path, Identity: strings.TrimSpace(string(pub)), Key: replicate.SegmentKey(secret), Lag: lag,
			Logf:  func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) },
			Fence: store.CheckFence} // a serve that lost its leader lease uploads nothing more
		r.wg.Go(func() { r.run(ctx, o, lag) })
	}
	r.wg.Go(func() { r.publish(ctx, lag) })
	return r, r.wg.Wait, nil
}

// run holds the database's lock (waiting for it while another process replicates it), starts
// its replicator and closes it, shipping the last changes, when ctx ends.
func (r *replication) run(ctx context.Context, o replicate.Options, lag time.Duration) {
	lock, err := os.OpenFile(o.Path+"-replicate.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		r.log.Error("replicate: lock file", "db", o.DB, "err", err)
		return
	}
	defer lock.Close()
	for {
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			break
		} else if !errors.Is(err, unix.EWOULDBLOCK) {
			r.log.Error("replicate: lock file", "db", o.DB, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(lag):
		}
	}
	var rep *replicate.Replicator
	for rep == nil {
		if rep, err = replicate.Start(ctx, o); err != nil {
			r.log.Warn("replicate: start (retrying)", "db", o.DB, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(lag):
			}
		}
	}
	r.mu.Lock()
	r.reps[o.DB] = rep
	r.mu.Unlock()
	r.log.Info("replicating", "db", o.DB, "to", o.Client.ObjectURL("replica/"+o.DB+"/"), "generation", rep.Status().Generation, "lag", lag.String())
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := rep.Close(cctx); err != nil {
		r.log.Warn("replicate: last sync", "db", o.DB, "err", err)
	}
}

// Statuses are the databases this process replicates now.
func (r *replication) Statuses() []replicate.Published {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []replicate.Published
	for name, rep := range r.reps {
		s := rep.Status()
		row := replicate.Published{DB: name, Generation: s.Generation, Seq: s.Seq, Replicated: s.Replicated}
		if s.Err != nil {
			row.Error = s.Err.Error()
		}
		out = append(out, row)
	}
	return out
}

// publish writes the statuses to the status file every quarter lag (per database, so two
// serves each replicating one database do not overwrite each other's rows): an anchor and a
// kubernetes Start wait for it (replicatedFirst), the Start on every dispatch.
func (r *replication) publish(ctx context.Context, lag time.Duration) {
	t := time.NewTicker(max(lag/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		for _, s := range r.Statuses() {
			b, _ := json.Marshal(s)
			p := filepath.Join(r.h.Dir, s.DB+"-"+replicate.PublishedFile)
			tmp := p + ".tmp"
			if err := os.WriteFile(tmp, b, 0o600); err == nil {
				os.Rename(tmp, p)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Describe and Collect make replication a Prometheus collector: agora_replicate_lag_seconds.
func (r *replication) Describe(ch chan<- *prometheus.Desc) { ch <- replicateLagDesc() }

func (r *replication) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, s := range r.Statuses() {
		ch <- prometheus.MustNewConstMetric(replicateLagDesc(), prometheus.GaugeValue, now.Sub(s.Replicated).Seconds(), s.DB)
	}
}

var replicateLagDesc = sync.OnceValue(func() *prometheus.Desc {
	return prometheus.NewDesc("agora_replicate_lag_seconds",
		"How far replication to object storage may be behind: every commit older than this is in the bucket.", []string{"db"}, nil)
})

// agoraReplica is agora.db of h.
func agoraReplica(h *home.Home) replicaDB {
	return replicaDB{"agora", filepath.Join(h.Dir, home.DBFile)}
}
