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

// With the home's Kubernetes identity its audit key alone, every process of an
// HA home (leader: in agora.yaml) that keeps warm slots selects the leader's slot Jobs, their
// parts and its pools (named by a hash of the home) as its own. `agora mcp` runs its own
// standbys and pool keeper and is no leader: on a standby replica's pod (or wherever the
// home's keys were copied) its start swept the leader's ready slots (none is live in its
// state directory), its keeper found the leader's pool by name and deleted it at its close,
// and the leader swept the slots it made. Now only a process under a leader's fence (the
// leading serve, the supervisors and standbys it starts) holds or sweeps them; without
// leader: nothing changes. Failed before: the unfenced process of the HA home listed the
// kubernetes target as warm, kept pools and asked for the target's provider to sweep.
func TestRedTeam44_OnlyTheLeaderHoldsK8sWarm(t *testing.T) {
	mk := func(leader bool) (*Dispatcher, *atomic.Int32) {
		cfg := &config.Config{Targets: map[string]config.Target{
			"k8s":  {Provider: config.ProviderKubernetes, Warm: 2},
			"pool": {Provider: config.ProviderKubernetes, Warm: 2, Remote: config.Remote{WarmPool: true, Backend: config.BackendAgentSandbox}},
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
	holds := func(d *Dispatcher, asked *atomic.Int32) (warm bool, pools bool, swept bool) {
		before := asked.Load()
		if err := d.SweepWarm(t.Context()); err != nil {
			t.Fatal(err)
		}
		swept = asked.Load() > before
		_, warm = d.WarmTargets()["k8s"]
		k := d.KeepPools(t.Context())
		pools = k != nil
		k.Close()
		return warm, pools, swept
	}

	d, asked := mk(true)
	if warm, pools, swept := holds(d, asked); warm || pools || swept {
		t.Errorf("an HA home's process without the leader's fence: warm slots %v, pools %v, swept the cluster %v; want none (the leader's)", warm, pools, swept)
	}

	// The leader (or a child it started): its fence is set.
	restore := store.SetFence(func() error { return nil })
	if warm, pools, swept := holds(d, asked); !warm || !pools || !swept {
		t.Errorf("the leader: warm slots %v, pools %v, swept the cluster %v; want all", warm, pools, swept)
	}
	restore()

	// A home without leader: is as before.
	d, asked = mk(false)
	if warm, pools, swept := holds(d, asked); !warm || !pools || !swept {
		t.Errorf("a home without leader:: warm slots %v, pools %v, swept the cluster %v; want all", warm, pools, swept)
	}
}
