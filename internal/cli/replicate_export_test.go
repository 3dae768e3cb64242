package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The kubernetes provider finds the registry's other faces through the wrapper.
var (
	_ remote.ClaimExporter  = replicatedExporter{}
	_ remote.Revoker        = replicatedExporter{}
	_ kubernetes.Reattacher = replicatedExporter{}
)

// replicaRig is one database's replication as a Start sees it: the lock a replicating serve
// holds and the status file it publishes.
type replicaRig struct {
	w    replicatedFirst
	lock *os.File
}

func newReplicaRig(t *testing.T, held bool) *replicaRig {
	t.Helper()
	dir := t.TempDir()
	r := &replicaRig{w: replicatedFirst{status: filepath.Join(dir, "agora-replicate.json"), lock: filepath.Join(dir, "agora.db-replicate.lock"),
		wait: 300 * time.Millisecond, poll: 5 * time.Millisecond}}
	if held {
		f, err := os.OpenFile(r.w.lock, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		r.lock = f
	}
	return r
}

// publish writes the status a replicator publishes once its snapshot of at is in the bucket.
func (r *replicaRig) publish(at time.Time) error {
	b, err := json.Marshal(replicate.Published{DB: "agora", Replicated: at})
	if err != nil {
		return err
	}
	return os.WriteFile(r.w.status, b, 0o600)
}

func exportSpec(t *testing.T, id string) compute.Spec {
	return compute.Spec{ID: id, Binds: []compute.Bind{{Src: t.TempDir(), Dst: wire.OutPath, Writable: true, Result: true}}}
}

// TestReplicatedExport_WaitsForTheReplica: while a serve replicates the home, a Start's
// session (and so its pod) comes only once the replica holds it; a replica that stays
// behind fails the export and revokes the session it made, so no pod is made with a token
// that the next leader's restored home would not know.
func TestReplicatedExport_WaitsForTheReplica(t *testing.T) {
	reg := &netgw.Registry{Dir: t.TempDir()}

	behind := newReplicaRig(t, true)
	if err := behind.publish(time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	x := exporterFor(reg, []replicatedFirst{behind.w})
	s, err := x.Export(t.Context(), exportSpec(t, "d-behind"))
	if err == nil || !strings.Contains(err.Error(), "not in the replica") {
		t.Fatalf("export with the replica behind: session %v, err %v; want refused", s, err)
	}
	if _, err := reg.Reattach(t.Context(), compute.Spec{ID: "d-behind"}); err == nil {
		t.Errorf("the refused export's session still stands: a pod's token would open it")
	}

	caught := newReplicaRig(t, true)
	x = exporterFor(reg, []replicatedFirst{caught.w})
	// A replicator ticking: each look publishes the time of its snapshot.
	stop, published := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := caught.publish(time.Now()); err != nil {
				published <- err
				return
			}
			select {
			case <-stop:
				published <- nil
				return
			case <-tick.C:
			}
		}
	}()
	s, err = x.Export(t.Context(), exportSpec(t, "d-caught"))
	if err != nil || s == nil || s.Dispatch != "d-caught" {
		t.Fatalf("export with the replica catching up: %v, %v", s, err)
	}
	close(stop)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Nobody replicates (no serve holds the lock): nothing to wait for.
	idle := newReplicaRig(t, false)
	x = exporterFor(reg, []replicatedFirst{idle.w})
	if s, err = x.Export(t.Context(), exportSpec(t, "d-idle")); err != nil {
		t.Fatalf("export with no replication running: %v", err)
	}
	s.Close()

	// A home that does not replicate gets the registry itself.
	if got := exporterFor(reg, nil); got != remote.Exporter(reg) {
		t.Errorf("exporterFor with no waits = %T, want the registry", got)
	}
}
