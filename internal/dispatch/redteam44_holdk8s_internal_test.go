package dispatch

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/store"
)

// With the home's Kubernetes identity its audit key alone, every process of an HA home
// (leader: in agora.yaml) that keeps warm pools selects the leader's pools (named by a hash of
// the home) as its own. `agora mcp` runs its own pool keeper and is no leader: on a standby
// replica's pod (or wherever the home's keys were copied) its keeper would find the leader's
// pool by name and delete it at its close. Only a process under a leader's fence (the leading
// serve, the supervisors and standbys it starts) holds them; without leader: nothing
// changes.
func TestRedTeam44_OnlyTheLeaderHoldsK8sWarm(t *testing.T) {
	mk := func(leader bool) (*Dispatcher, *atomic.Int32) {
		cfg := &config.Config{Targets: map[string]config.Target{
			"pool": {Provider: config.ProviderKubernetes, Warm: 2, Remote: config.Remote{WarmPool: new(true), Backend: config.BackendAgentSandbox}},
		}}
		if leader {
			cfg.Leader = config.Leader{Namespace: "agora", Lease: "agora-leader"}
		}
		var asked atomic.Int32
		d := &Dispatcher{Config: cfg, StateDir: filepath.Join(t.TempDir(), "dispatches"), testOnlyInvokingUser: true,
			RemoteProviders: func(context.Context, string, config.Target) (compute.Provider, error) {
				asked.Add(1)
				return nil, errors.New("no cluster in this test")
			}}
		return d, &asked
	}
	holds := func(d *Dispatcher) (warm bool, pools bool) {
		if err := d.SweepWarm(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, warm = d.WarmTargets()["pool"]
		k := d.KeepPools(t.Context())
		pools = k != nil
		k.Close()
		return warm, pools
	}

	d, asked := mk(true)
	if warm, pools := holds(d); warm || pools || asked.Load() != 0 {
		t.Errorf("an HA home's process without the leader's fence: warm %v, pools %v, asked the cluster %d times; want none (the leader's)", warm, pools, asked.Load())
	}

	// The leader (or a child it started): its fence is set.
	restore := store.SetFence(func() error { return nil })
	if warm, pools := holds(d); !warm || !pools {
		t.Errorf("the leader: warm %v, pools %v; want both", warm, pools)
	}
	restore()

	// A home without leader: is as before.
	d, _ = mk(false)
	if warm, pools := holds(d); !warm || !pools {
		t.Errorf("a home without leader: warm %v, pools %v; want both", warm, pools)
	}
}
