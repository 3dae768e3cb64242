package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
)

// Docker warm slots: for a docker target with `warm: N`, N worker containers started
// ahead by the target's provider, which keeps them behind [compute.Warmer]
// (compute/container/slots: the containers, the slot gateway their holder serves, the claim
// marks, the read-only places). The dispatch leases each slot's uid, as for a cold container,
// and hands the lease to the dispatch that claims it.

// gatewayDir is AGORA_HOME/gateway: StateDir is AGORA_HOME/dispatches.
func (d *Dispatcher) gatewayDir() string { return filepath.Join(filepath.Dir(d.StateDir), "gateway") }

// warmDockerTarget says whether a target keeps docker slots.
func warmDockerTarget(t config.Target) bool {
	return t.Warm > 0 && t.Provider == config.ProviderDocker && t.Sandbox != compute.SandboxNone
}

// opener is a warmer that serves something of its own while it holds slots (a docker
// warmer's slot gateway): opened before its first fill, closed with the pools.
type opener interface {
	Open(ctx context.Context) error
}

// dockerWarmer returns target's warmer, opened: after a sweep of what a killed holder left, it
// serves its slot gateway on a socket of its own until closed.
func (d *Dispatcher) dockerWarmer(ctx context.Context, target string) (compute.Warmer, error) {
	p, err := d.providerFor(ctx, target)
	if err != nil {
		return nil, err
	}
	wp, ok := p.(compute.WarmProvider)
	if !ok {
		return nil, fmt.Errorf("target %q: its provider keeps no warm slots", target)
	}
	wm, err := wp.Warmer(d.warmOptions(target))
	if err != nil {
		return nil, err
	}
	if o, ok := wm.(opener); ok {
		if err := o.Open(ctx); err != nil {
			return nil, err
		}
	}
	return wm, nil
}

// warmOptions are target's warm options for a provider: its slots' layout, and this process's log.
func (d *Dispatcher) warmOptions(target string) compute.WarmOptions {
	o := slotOptions(d.StateDir, target)
	o.Log = d.log()
	return o
}

// closeWarmer stops what wm serves, if anything.
func closeWarmer(wm compute.Warmer) {
	if c, ok := wm.(io.Closer); ok {
		c.Close()
	}
}

// sweepDocker is SweepWarm's part for docker slots: what killed holders (a resident process,
// a standby supervisor) left, when this home has a docker target with warm slots and this
// process could hold them (root). Every docker target's containers are swept: a target whose
// warm: was turned off since its holder was killed leaves slot containers too.
func (d *Dispatcher) sweepDocker(ctx context.Context) error {
	if d.Config == nil || os.Geteuid() != 0 {
		return nil
	}
	any := false
	for _, t := range d.Config.Targets {
		any = any || warmDockerTarget(t)
	}
	if !any {
		return nil
	}
	if _, err := os.Stat(d.gatewayDir()); errors.Is(err, os.ErrNotExist) {
		return nil // no holder ever ran here
	}
	var errs []error
	for name, t := range d.Config.Targets {
		if t.Provider != config.ProviderDocker {
			continue
		}
		p, err := d.providerFor(ctx, name)
		if err != nil {
			d.log().Warn("docker warm slots: cannot sweep the target's slot containers", "target", name, "err", err)
			continue
		}
		wp, ok := p.(compute.WarmProvider)
		if !ok {
			continue
		}
		wm, err := wp.Warmer(d.warmOptions(name))
		if err == nil {
			err = wm.Reap(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("docker warm slots of target %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// fillLeased starts one slot of target's template through wm as a uid of its own, leased
// until a claim takes the lease over or the slot is discarded.
func (w *WarmPools) fillLeased(ctx context.Context, target string, t config.Target, wm compute.Warmer) (*warmSlot, error) {
	w.mu.Lock()
	tmpl := w.tmpl[target]
	w.mu.Unlock()
	var b [8]byte
	_, _ = rand.Read(b[:])
	lease, err := leaseUID(w.d.StateDir, t.SandboxUID, warmLeasePrefix+hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	key := tmpl.ID
	tmpl.RunAs = &compute.HostUser{UID: lease.uid, GID: lease.uid}
	slot, err := wm.Fill(ctx, tmpl)
	if err != nil {
		lease.release()
		return nil, err
	}
	return &warmSlot{slot: slot, warmer: wm, lease: lease, key: key}, nil
}

// standbyDocker starts a docker standby's one slot (standby.go): this process's warmer of the
// target serves the slot gateway on a socket of its own, after sweeping what killed holders
// left, and starts one slot container of the stored template. stop ends the gateway; the
// standby calls it after its slot (or its claimed dispatch's container) has ended. The standby
// is the slot's holder: its gateway slot's hold, its claim mark and its socket are this
// process's, so the slot is claimed by none but the dispatch handed to it, and swept once this
// process is gone.
func (w *WarmPools) standbyDocker(ctx context.Context, target string, t config.Target) (*warmSlot, func(), error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("docker warm slots need a root agora (each slot runs as a uid of the target's sandbox_uid range)")
	}
	wm, err := w.d.dockerWarmer(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	tmpl := w.tmpl[target]
	tmpl.ID = wm.Shape(tmpl)
	w.tmpl[target] = tmpl
	w.warmers[target] = wm
	w.mu.Unlock()
	slot, err := w.fillLeased(ctx, target, t, wm)
	if err != nil {
		closeWarmer(wm)
		return nil, nil, err
	}
	return slot, func() { closeWarmer(wm) }, nil
}
