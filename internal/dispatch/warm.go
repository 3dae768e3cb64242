package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// warmDir, beside the stage directories, holds the warm slots' directories, one directory per
// target; a resident agora sweeps it when it starts (SweepWarm: each directory's warmer reaps it).
const warmDir = ".warm"

// WarmPools are a resident Dispatcher's warm slots: for each local target with
// `warm: N`, N bubblewrap sandboxes started ahead, each holding a sandbox uid lease of its
// own. A slot's shape is learnt from the target's last cold dispatch (the first dispatch of
// a target always starts cold); a dispatch claims a ready slot when it leases its uid (it
// adopts the slot's uid, so its stage is handed to the uid the slot runs as) and runs in it
// if its spec matches the slot's shape, else the slot is spent and the dispatch starts cold,
// counted. The one-shot CLI has none.
type WarmPools struct {
	d        *Dispatcher
	provider compute.WarmProvider // the local targets' provider; nil: no bubblewrap slots

	mu    sync.Mutex
	pools map[string]*warm.Pool // guarded by mu: by target, once a template exists
	// warmers are the docker targets' warmers, opened by StartWarm (a standby's: its target's);
	// a docker target without one keeps no slots. Guarded by mu.
	warmers map[string]compute.Warmer
	tmpl    map[string]compute.Spec // guarded by mu: each target's learnt template
	extra   map[string]*warmMisses  // guarded by mu: claims spent by a shape mismatch
	ctx     context.Context

	// standby: these are a standby supervisor's (standby.go): one slot, held, of heldTarget;
	// nothing is filled, and a cold start saves the target's template for the holder.
	standby    bool
	held       *warmSlot // guarded by mu
	heldTarget string
	// onMiss, in a standby, tells its holder that the claimed dispatch did not fit the slot
	// and started cold, so the holder counts it a cold fallback, not a warm start.
	onMiss func()
	// keeper makes and refreshes the `warm_pool` targets' pools (warmpool.go); nil: none.
	keeper *PoolKeeper
	// teardowns are the claimed slots whose task has ended and whose host side (a bubblewrap
	// slot's claim mounts and directory) is still being taken down: Close and a standby's
	// end wait for them (teardown).
	teardowns sync.WaitGroup
}

// warmMisses counts claimed slots whose dispatch did not fit: it started cold.
type warmMisses struct{ n uint64 }

// warmSlot is one held sandbox its target's warmer filled (slot, run by warmer: bubblewrap,
// docker) and the uid lease it runs as.
type warmSlot struct {
	slot   compute.WarmSlot
	warmer compute.Warmer
	lease  *uidLease
	key    string
	// quota is the disk quota a bubblewrap slot's stage was made with (a slot staged ahead).
	quota int64
}

func (w *warmSlot) Shape() string { return w.key }

// Alive says whether the held sandbox still waits (the pool counts and hands out live ones).
func (w *warmSlot) Alive() bool { return w.slot.Alive() }

// Discard implements warm.Slot: a slot never claimed is killed and its uid given back.
func (w *warmSlot) Discard() {
	w.slot.Discard()
	w.lease.release()
}

func (w *WarmPools) slotOptions(target string) compute.WarmOptions {
	return slotOptions(w.d.StateDir, target)
}

// StartWarm sweeps what a previous resident process left of its warm slots and returns the
// pools of this Dispatcher's local targets; nil when no local target asks for any. Close
// them when the process stops serving.
func (d *Dispatcher) StartWarm(ctx context.Context) (*WarmPools, error) {
	if d.Config == nil {
		return nil, nil
	}
	p, _ := d.LocalProvider.(compute.WarmProvider)
	if p != nil {
		if err := d.SweepWarm(ctx); err != nil {
			return nil, err
		}
	}
	any, docker, pool := false, false, false
	for _, t := range d.Config.Targets {
		any = any || (p != nil && warmTarget(t))
		docker = docker || warmDockerTarget(t)
		pool = pool || warmPoolTarget(t)
	}
	if !any && !docker && !pool {
		return nil, nil
	}
	w := &WarmPools{d: d, provider: p, pools: map[string]*warm.Pool{}, tmpl: map[string]compute.Spec{}, extra: map[string]*warmMisses{}, warmers: map[string]compute.Warmer{}, ctx: context.WithoutCancel(ctx)}
	w.keeper = d.KeepPools(ctx)
	if docker {
		// Docker slots (warmdocker.go): each target's warmer, opened (its gateway, after a sweep
		// of a killed holder's). A process that cannot hold them holds none (its docker
		// dispatches start cold, and the counts show none ready) rather than fail its local
		// slots too.
		if os.Geteuid() != 0 {
			d.log().Warn("docker warm slots need a root agora (each slot runs as a uid of the target's sandbox_uid range); none are kept")
		} else {
			for name, t := range d.Config.Targets {
				if !warmDockerTarget(t) {
					continue
				}
				if wm, err := d.dockerWarmer(ctx, name); err != nil {
					d.log().Warn("docker warm slots: none are kept", "target", name, "err", err)
				} else {
					w.warmers[name] = wm
				}
			}
		}
	}
	d.Warm = w
	return w, nil
}

// SweepWarm kills and removes what dead holders left of warm slots under this home: the
// slots of a resident process or of standby supervisors killed with -9. Slots whose holder
// lives are left.
func (d *Dispatcher) SweepWarm(ctx context.Context) error {
	// Every target's directory is swept, not only today's warm ones: a target whose warm: was
	// turned off, renamed or removed since its holder was killed would keep its slots' mounts
	// for the machine's life. Slots of a living holder are left (ReapSlots).
	root := filepath.Join(d.StateDir, warmDir)
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sweep warm slots: %w", err)
	}
	p, _ := d.LocalProvider.(compute.WarmProvider)
	for _, e := range ents {
		if !e.IsDir() || p == nil {
			continue
		}
		wm, err := p.Warmer(slotOptions(d.StateDir, e.Name()))
		if err == nil {
			err = wm.Reap(ctx)
		}
		if err != nil {
			return fmt.Errorf("sweep warm slots of target %q: %w", e.Name(), err)
		}
	}
	// Docker slots of killed holders (their containers, tokens, claim marks): an engine that
	// does not answer leaves them for the next sweep, never stops the local slots.
	if err := d.sweepDocker(ctx); err != nil {
		d.log().Warn("docker warm slots: sweep what killed holders left", "err", err)
	}
	return nil
}

// WarmTargets lists the targets of this home whose warm slots a process of this host can
// hold: sandboxed, warm: N > 0, local (bubblewrap slots) or docker (slot containers), and the
// kubernetes targets whose pools this process keeps (the leader's: leads).
func (d *Dispatcher) WarmTargets() map[string]int {
	out := map[string]int{}
	if d.Config == nil {
		return out
	}
	for name, t := range d.Config.Targets {
		if warmTarget(t) || warmDockerTarget(t) || warmPoolTarget(t) && d.leads() {
			out[name] = t.Warm
		}
	}
	return out
}

// warmTarget says whether a target keeps slots this process can hold.
func warmTarget(t config.Target) bool {
	return t.Warm > 0 && (t.Provider == "" || t.Provider == config.ProviderLocal) && t.Sandbox != compute.SandboxNone
}

// Close discards every ready slot and waits for the claimed ones' teardowns.
func (w *WarmPools) Close() {
	if w == nil {
		return
	}
	defer w.teardowns.Wait()
	w.mu.Lock()
	pools := w.pools
	w.pools = map[string]*warm.Pool{}
	w.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
	w.mu.Lock()
	warmers := w.warmers
	w.warmers = map[string]compute.Warmer{}
	w.mu.Unlock()
	for _, wm := range warmers {
		closeWarmer(wm)
	}
	w.keeper.Close()
}

// Counts returns every warm target's numbers, for doctor, metrics and the web view.
func (w *WarmPools) Counts() []warm.Counts {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []warm.Counts
	for name, t := range w.d.Config.Targets {
		if !warmTarget(t) && !warmDockerTarget(t) {
			continue
		}
		c := warm.Counts{Target: name, Want: t.Warm}
		if p := w.pools[name]; p != nil {
			c = p.Counts()
		}
		if m := w.extra[name]; m != nil {
			c.Cold += m.n
		}
		out = append(out, c)
	}
	for _, c := range w.keeper.Counts() {
		if m := w.extra[c.Target]; m != nil {
			c.Cold += m.n
		}
		out = append(out, c)
	}
	return out
}

// poolClaimed counts a dispatch that ran in a pod of its target's pool.
func (w *WarmPools) poolClaimed(target string) { w.keeper.claimedOne(target) }

// claim takes a ready slot of target for dispatch id and moves its uid lease to id. nil when
// none is ready (counted cold by the pool).
func (w *WarmPools) claim(target string, id string) *warmSlot {
	if w == nil {
		return nil
	}
	if w.standby {
		return w.claimHeld(target, id)
	}
	w.mu.Lock()
	p, key := w.pools[target], w.tmpl[target].ID
	w.mu.Unlock()
	if p == nil {
		return nil
	}
	s, _ := p.Claim(key).(*warmSlot)
	if s == nil {
		return nil
	}
	if err := s.lease.transfer(id); err != nil {
		s.Discard()
		return nil
	}
	return s
}

// missed counts a claimed slot whose dispatch did not fit it.
func (w *WarmPools) missed(target string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.extra[target]
	if m == nil {
		m = &warmMisses{}
		w.extra[target] = m
	}
	m.n++
	if w.onMiss != nil {
		w.onMiss()
	}
}

// learn makes spec (a cold dispatch's, started) its target's template and starts the
// target's pool the first time. A later template replaces the shape new slots get.
func (w *WarmPools) learn(target string, t config.Target, spec compute.Spec) {
	if w == nil {
		return
	}
	if warmPoolTarget(t) {
		// The keeper makes the pool from the template file, as serve's does.
		if spec.Sandbox != compute.SandboxNone && !holdsToken(spec.Env) {
			w.d.saveTemplate(target, t, spec)
			w.keeper.Kick()
		}
		return
	}
	w.mu.Lock()
	wm := w.warmers[target]
	w.mu.Unlock()
	docker := warmDockerTarget(t) && wm != nil
	if !(docker || warmTarget(t)) || spec.Sandbox == compute.SandboxNone || holdsToken(spec.Env) {
		return
	}
	if w.standby {
		// A standby's dispatch that did not fit its slot: the target's shape changed, which
		// the holder learns from the file (a docker standby's too: it holds one slot, no
		// pool).
		w.d.saveTemplate(target, t, spec)
		return
	}
	tmpl := templateOf(w.d.StateDir, target, spec) // the pool's key: the shape without the uid
	if docker {
		tmpl.ID = wm.Shape(tmpl)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, had := w.tmpl[target]
	w.tmpl[target] = tmpl
	if p := w.pools[target]; p != nil && had && prev.ID != tmpl.ID {
		// The target's dispatches changed shape: slots of the old one would never be claimed.
		p.Flush()
	}
	if w.pools[target] == nil {
		w.pools[target] = warm.New(w.ctx, target, t.Warm, func(ctx context.Context) (warm.Slot, error) {
			if docker {
				return w.fillLeased(ctx, target, t, wm)
			}
			return w.fill(ctx, target, t)
		})
	}
}

// fill starts one slot of target's current template, as a uid of its own. A slot whose
// template was replaced while it started is discarded and started again: the pool must not
// hold a slot of a shape no dispatch asks for.
func (w *WarmPools) fill(ctx context.Context, target string, t config.Target) (warm.Slot, error) {
	for range 3 {
		s, err := w.fillOnce(ctx, target, t)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		current := w.tmpl[target].ID
		w.mu.Unlock()
		if s.key == current {
			return s, nil
		}
		s.Discard()
	}
	return nil, fmt.Errorf("warm slots of target %q: its dispatches keep changing shape", target)
}

func (w *WarmPools) fillOnce(ctx context.Context, target string, t config.Target) (*warmSlot, error) {
	w.mu.Lock()
	tmpl := w.tmpl[target]
	w.mu.Unlock()
	var lease *uidLease
	if os.Geteuid() == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		var err error
		if lease, err = leaseUID(w.d.StateDir, t.SandboxUID, warmLeasePrefix+hex.EncodeToString(b[:])); err != nil {
			return nil, err
		}
		tmpl.RunAs = &compute.HostUser{UID: lease.uid, GID: lease.uid}
	}
	key := tmpl.ID
	o := w.slotOptions(target)
	quota := int64(0)
	if lease != nil {
		// A root agora's slot makes its dispatch's directories and disk quota at fill.
		quota = int64(t.Disk)
		o.Stage = slotStage(quota)
	}
	var wm compute.Warmer
	var slot compute.WarmSlot
	var err error
	if w.provider == nil {
		err = errors.New("new warm slot: the target's provider keeps no warm slots")
	} else if wm, err = w.provider.Warmer(o); err == nil {
		slot, err = wm.Fill(ctx, tmpl)
	}
	if err != nil {
		lease.release()
		return nil, err
	}
	return &warmSlot{slot: slot, warmer: wm, lease: lease, key: key, quota: quota}, nil
}

// slotStage is the stage a bubblewrap slot makes ahead (local's slotstage.go): the
// places newStage would make for a dispatch of a root agora, in the same layout, on a disk
// quota of quota bytes as mountQuota mounts it (named after the slot; 0: none).
func slotStage(quota int64) *compute.SlotStage {
	st := &compute.SlotStage{Dirs: map[string]string{
		wire.BundlePath:          wire.BundleDir,
		wire.CapabilityFilesPath: wire.CapabilityFilesDir,
		wire.WorkspacePath:       wire.WorkspaceDir,
		wire.OutPath:             wire.OutDir,
	}}
	if quota > 0 {
		st.Quota = diskDir
		st.Mount = func(dir string) error {
			return mountQuota(dir, filepath.Base(filepath.Dir(filepath.Dir(dir))), quota)
		}
		st.Dirs[wire.WorkspacePath] = diskDir + "/" + wire.WorkspaceDir
		st.Dirs[wire.OutPath] = diskDir + "/" + wire.OutDir
	}
	return st
}

// takeStage hands the claimed slot's stage to the dispatch, when the slot made one of the
// dispatch's quota; nil otherwise (the dispatch makes its own, and the claim then finds its
// binds are not the stage's: it starts cold, counted).
func (w *warmSlot) takeStage(l stageLimits) *prestaged {
	taker, ok := w.slot.(compute.StageTaker)
	if !ok || l.owner == nil || w.quota != l.disk {
		return nil
	}
	st, release, ok := taker.TakeStage()
	if !ok {
		return nil
	}
	pre := &prestaged{bundle: st.Dirs[wire.BundlePath], workspace: st.Dirs[wire.WorkspacePath], out: st.Dirs[wire.OutPath],
		capFiles: st.Dirs[wire.CapabilityFilesPath], release: release}
	if pre.bundle == "" || pre.workspace == "" || pre.out == "" || pre.capFiles == "" {
		release()
		return nil
	}
	if w.quota > 0 {
		pre.disk = filepath.Join(st.Root, diskDir)
	}
	return pre
}

// startWarm runs s's spec in its claimed slot. warmed false: the spec did not fit (the slot
// is spent, counted) and the caller starts it cold, as the same uid. A bubblewrap slot's
// claim records the dispatch started (with what its sandbox runs) before it releases the
// slot, and returns that record; started is nil for the other slots, whose caller records
// the start. An error fails the dispatch: it is on record as started, or could not be.
func (s *supervision) startWarm(ctx context.Context) (h compute.Handle, started *Record, warmed bool, err error) {
	w := s.warm
	s.warm = nil
	if _, ok := s.provider.(compute.WarmProvider); !ok || w.warmer == nil {
		w.slot.Discard()
		return nil, nil, false, nil
	}
	// The decision before its effect: the start, and what runs, commit before anything of
	// the claim runs; a claim refused before this point records nothing and goes cold.
	var recErr error
	commit := func(taskID string) error {
		started, recErr = s.d.Records.started(ctx, s.r.ID, taskID, selfSupervisor(), s.bins)
		if recErr == nil {
			s.bins = nil
		}
		return recErr
	}
	if rc, ok := w.slot.(compute.ReleaseCommitter); !ok || !rc.CommitsBeforeRelease() {
		// The bins are on record before the slot runs anything, and the start after it.
		if err := s.recordBinaries(ctx); err != nil {
			w.slot.Discard()
			return nil, nil, false, err
		}
	}
	h, err = w.warmer.Run(ctx, w.slot, s.spec, commit)
	switch {
	case err == nil:
		return h, started, true, nil
	case recErr != nil:
		return nil, nil, false, recErr // the slot was killed unreleased
	case started != nil && s.d.Records.cancelRequested(context.WithoutCancel(ctx), s.r.ID):
		// A cancel (recorded before it killed the sandbox) came between the start's record
		// and the release: the slot ended because of it, and the dispatch ends cancelled, as
		// one cancelled a moment later would, not provider-failed.
		return nil, nil, false, &failure{Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "cancelled as its warm slot was released"}}
	case started != nil:
		// On record as started, yet not released: the dispatch ends here, never cold.
		return nil, nil, false, fmt.Errorf("start in warm slot: %w", err)
	}
	s.d.Warm.missed(s.r.Target)
	if !errors.Is(err, compute.ErrSlotShape) {
		s.d.log().Warn("warm slot failed; starting cold", "dispatch", s.r.ID, "err", err)
	}
	return nil, nil, false, nil
}

// holdsToken says whether env carries a per-dispatch credential the worker reads (the egress
// proxy's token): such a spec is never a template, or the next slots would start with one
// dispatch's credential in their environment. Its dispatches start cold.
func holdsToken(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, wire.ProxyTokenEnv+"=") {
			return true
		}
	}
	return false
}

// teardown waits for h's task to be gone (its processes reaped, its cgroup removed) and
// leaves what the provider then takes down on the host for it (a bubblewrap slot's claim
// mounts and directory: 1-5 ms of unmounts and their RCU grace periods) to end in the
// background: the dispatch's stage is not reached through them (they are under the slot's
// directory, root's alone), and its sandbox, the only other process that saw them, is gone.
// A holder killed meanwhile leaves them to ReapSlots, as one killed mid-claim does.
func (w *WarmPools) teardown(h compute.Handle) {
	if _, ok := h.(exitWaiter); !ok {
		_, _ = h.Wait()
		return
	}
	_, _ = exited(h)
	w.teardowns.Go(func() { _, _ = h.Wait() })
}
