package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/netgw"
)

// Kubernetes warm slots (#30): for a kubernetes target with `warm: N`, N pods started ahead
// (kubernetes.Provider.StartSlot: a Job per slot with its own token Secret and a gateway-only
// NetworkPolicy, the worker in claim mode). The slot's token is a gateway slot's
// (AGORA_HOME/gateway/slots), which the network gateway the pods reach serves (`agora gateway
// serve`, `agora orch serve --gateway`: the same directory); this process holds each slot's
// hold lock, so a holder killed with -9 leaves slots the gateway refuses and the next holder
// sweeps. A claim checks the slot's Job and pod, exports the dispatch's session, binds it to
// the slot (the gateway revokes the slot's token as it hands the grant over) and follows the
// slot's Job as the dispatch's.
//
// Only a resident Dispatcher holds them ([Dispatcher.StartWarm]), as for the docker slots:
// the claim hands an in-process gateway slot to the dispatch. orch serve's detached
// supervisors (the local standbys) do not hold Kubernetes slots yet.

// warmK8sTarget says whether a target keeps Kubernetes slots.
func warmK8sTarget(t config.Target) bool {
	return t.Warm > 0 && t.Provider == config.ProviderKubernetes
}

// k8sSlots is the gateway slot store the kubernetes slots' tokens live in.
func (d *Dispatcher) k8sSlots() *netgw.Slots {
	return &netgw.Slots{Dir: filepath.Join(d.gatewayDir(), "slots")}
}

// k8sHome is this home's identity on its slots' Jobs (kubernetes.SlotOptions.Home): the host
// and AGORA_HOME, hashed, so homes sharing a namespace never sweep each other's slots.
func (d *Dispatcher) k8sHome() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + filepath.Dir(d.StateDir)))
	return hex.EncodeToString(sum[:10])
}

// k8sProvider is target's provider as a kubernetes one.
func (d *Dispatcher) k8sProvider(ctx context.Context, target string) (*kubernetes.Provider, error) {
	p, err := d.providerFor(ctx, target)
	if err != nil {
		return nil, err
	}
	kp, ok := p.(*kubernetes.Provider)
	if !ok {
		return nil, fmt.Errorf("target %q: not a kubernetes provider", target)
	}
	return kp, nil
}

// sweepK8sSlots revokes the gateway slots of dead holders and deletes the slot Jobs no living
// holder stands for (claimed ones run on to their deadline).
func (d *Dispatcher) sweepK8sSlots(ctx context.Context) error {
	slots := d.k8sSlots()
	if _, err := slots.Sweep(ctx); err != nil {
		return fmt.Errorf("kubernetes warm slots: %w", err)
	}
	live := func(id string) bool {
		_, err := os.Lstat(filepath.Join(slots.Dir, id))
		return err == nil
	}
	for name, t := range d.Config.Targets {
		if t.Provider != config.ProviderKubernetes {
			continue
		}
		p, err := d.k8sProvider(ctx, name)
		if err != nil {
			d.log().Warn("kubernetes warm slots: cannot sweep the target's slot pods", "target", name, "err", err)
			continue
		}
		if _, err := p.SweepSlots(ctx, d.k8sHome(), live); err != nil {
			d.log().Warn("kubernetes warm slots: sweep", "target", name, "err", err)
		}
	}
	return nil
}

// fillK8s starts one Kubernetes slot of target's template.
func (w *WarmPools) fillK8s(ctx context.Context, target string) (*warmSlot, error) {
	w.mu.Lock()
	tmpl := w.tmpl[target]
	w.mu.Unlock()
	p, err := w.d.k8sProvider(ctx, target)
	if err != nil {
		return nil, err
	}
	gs, err := w.d.k8sSlots().Create(ctx)
	if err != nil {
		return nil, err
	}
	sl, err := p.StartSlot(ctx, tmpl, kubernetes.SlotOptions{ID: gs.ID, Token: gs.Token, Home: w.d.k8sHome()})
	if err != nil {
		gs.Close()
		return nil, err
	}
	return &warmSlot{pod: sl, gw: gs, key: tmpl.ID}, nil
}

// startK8sWarm runs s's spec in its claimed Kubernetes slot. started false: the spec did not
// fit, the slot changed, or its worker did not take the grant in slotBindWait (the slot is
// spent, counted) and the caller starts it cold.
func (s *supervision) startK8sWarm(ctx context.Context, w *warmSlot) (compute.Handle, bool) {
	bind := func(ctx context.Context, dispatch, token string) error {
		bctx, cancel := context.WithTimeout(ctx, slotBindWait)
		defer cancel()
		return w.gw.Bind(bctx, dispatch, token)
	}
	h, err := w.pod.Run(ctx, s.spec, bind)
	if err != nil {
		w.gw.Close()
		s.d.Warm.missed(s.r.Target)
		if !errors.Is(err, kubernetes.ErrSlotChanged) {
			s.d.log().Warn("kubernetes warm slot failed; starting cold", "dispatch", s.r.ID, "err", err)
		} else {
			s.d.log().Warn("kubernetes warm slot changed or gone; starting cold", "dispatch", s.r.ID, "err", err)
		}
		return nil, false
	}
	return h, true
}
