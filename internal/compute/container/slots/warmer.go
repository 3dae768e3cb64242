// Package slots keeps a docker target's warm slots: worker containers started ahead by
// the container provider ([container.Provider.StartSlot]: a cold container's hardening, no
// network, the gateway's Unix socket its only way out, the slot's token on fd 3), and the
// slot gateway their holder serves on that socket (sessions and slots are files below
// AGORA_HOME/gateway, as `agora gateway serve`'s are). A dispatch that claims a slot has its
// read-only files put in the slot's read-only places (files.go), the rest of its session
// exported and bound to the slot; the slot's worker claims it, fetches the dispatch's files,
// runs, streams its output and uploads its out directory, exactly as a cold remote worker.
//
// slots runs on the host side. It is the container provider's half that needs the network
// gateway ([netgw]): [Provider] wraps a [container.Provider] and is its [compute.WarmProvider].
// It knows nothing of dispatch records, catalogs or secrets' values; the uid a slot runs as
// is leased by its caller.
package slots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// slotBindWait bounds how long a claim waits for its slot's worker to take the grant; a slot
// whose worker does not is spent, and the dispatch starts cold.
const slotBindWait = 10 * time.Second

// ErrSlotClaimed means a slot was run before: a slot runs one claim, and a second Run leaves
// it to the first.
var ErrSlotClaimed = errors.New("docker warm slot already claimed")

// Options say where a home's slot gateway keeps its state and what it serves.
type Options struct {
	// Home is AGORA_HOME: the gateway's state is its gateway directory.
	Home string
	// Version is the worker build the gateway answers its slots with
	// (workerremote.VersionOf of the worker binary).
	Version string
}

// Provider is a container provider that keeps warm slots.
type Provider struct {
	*container.Provider
	opts Options
}

var (
	_ compute.WarmProvider = (*Provider)(nil)
	_ compute.Warmer       = (*Warmer)(nil)
	_ compute.WarmSlot     = (*Slot)(nil)
)

// New wraps p so that its target can keep warm slots.
func New(p *container.Provider, o Options) *Provider { return &Provider{Provider: p, opts: o} }

// Warmer returns the warmer of one target's docker slots. It serves a slot gateway of its
// own once opened ([Warmer.Open]); [Warmer.Reap] needs none.
func (p *Provider) Warmer(o compute.WarmOptions) (compute.Warmer, error) {
	if p.opts.Home == "" {
		return nil, errors.New("docker warm slots: no agora home to keep them in")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Warmer{p: p, g: newGateway(p.opts.Home), version: p.opts.Version, log: log}, nil
}

// Warmer fills, runs and reaps one target's docker slots, and serves their gateway.
type Warmer struct {
	p       *Provider
	g       *gateway
	version string
	log     *slog.Logger

	mu   sync.Mutex
	open bool // guarded by mu: the gateway serves
}

// Open sweeps what a killed holder left and serves the slot gateway on a socket of its own,
// AGORA_HOME/gateway/slots-RANDOM.sock. Close stops it.
func (w *Warmer) Open(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open {
		return nil
	}
	if err := w.g.start(ctx, w.p.Provider, w.version, w.log); err != nil {
		return err
	}
	w.open = true
	return nil
}

// Close stops the slot gateway. Slots already claimed have ended by then (their caller
// waited for them); ready ones were discarded.
func (w *Warmer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open {
		w.g.close()
		w.open = false
	}
	return nil
}

// Shape implements [compute.Warmer]: the local shape of the spec (everything below /agora
// comes at claim, and so does the system trust store of a dispatch with the egress proxy: it
// counts by its place alone, see stagedBind) and the worker it was started with.
func (w *Warmer) Shape(s compute.Spec) string { return dockerShape(withoutRunAs(s)) }

// dockerShape is a docker slot's key: see [Warmer.Shape].
func dockerShape(s compute.Spec) string {
	worker := ""
	for _, b := range s.Binds {
		if b.Dst == wire.BinPath {
			worker = b.Src
		}
	}
	return "docker:" + compute.SlotShape(s, compute.WarmOptions{ClaimRoot: wire.DefaultRoot, PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}, ClaimFiles: []string{wire.SystemTrustFile}}) + ":" + worker
}

func withoutRunAs(s compute.Spec) compute.Spec {
	s.RunAs = nil
	return s
}

// Slot is one docker slot: its container (p's), its gateway slot and its read-only places.
type Slot struct {
	p     *Provider
	box   *container.Slot
	gw    *netgw.Slot
	files *slotFiles
	shape string
	// claimed is set by the first Run: a second is refused and leaves the slot, which is
	// the first claim's.
	claimed atomic.Bool
}

// Shape implements [compute.WarmSlot].
func (s *Slot) Shape() string { return s.shape }

// Alive implements [compute.WarmSlot]: the container still runs.
func (s *Slot) Alive() bool { return s.box.Alive() }

// Discard implements [compute.WarmSlot]: the slot's token is revoked first, so its worker
// can claim nothing meanwhile, then its container and places go.
func (s *Slot) Discard() {
	s.gw.Close()
	s.box.Discard()
	s.files.remove()
}

// Fill implements [compute.Warmer]: one slot container of tmpl as tmpl.RunAs, which MUST be
// set (a uid of the target's range per slot).
func (w *Warmer) Fill(ctx context.Context, tmpl compute.Spec) (compute.WarmSlot, error) {
	w.mu.Lock()
	open := w.open
	w.mu.Unlock()
	if !open {
		return nil, errors.New("docker warm slots: no slot gateway")
	}
	if tmpl.RunAs == nil {
		return nil, errors.New("docker warm slots: a slot runs as a uid its holder leased; none was given")
	}
	g := w.g
	// Its working directory is not the workspace: the engine would make that (root's) in the
	// slot's tmpfs before the worker fetches the workspace there.
	spec := compute.Spec{Argv: tmpl.Argv, Dir: "/tmp", Limits: tmpl.Limits, Sandbox: tmpl.Sandbox, RunAs: tmpl.RunAs}
	for _, kv := range tmpl.Env {
		if !strings.HasPrefix(kv, "AGORA_DISPATCH_ID=") {
			spec.Env = append(spec.Env, kv)
		}
	}
	for _, bd := range tmpl.Binds {
		if bd.Dst == wire.BinPath {
			spec.Binds = append(spec.Binds, compute.Bind{Src: bd.Src, Dst: bd.Dst})
		}
	}
	gs, err := g.slots.Create(ctx)
	if err != nil {
		return nil, err
	}
	// After the gateway slot exists: a sweep spares the places of a standing slot.
	files, staged, err := g.stageSlotFiles(gs.ID, tmpl)
	if err != nil {
		gs.Close()
		return nil, err
	}
	spec.Binds = append(spec.Binds, staged...)
	shape := w.Shape(tmpl)
	box, err := w.p.StartSlot(ctx, spec, container.SlotOptions{ID: gs.ID, Token: gs.Token, Home: g.home,
		Holder: fmt.Sprintf("pid-%d", os.Getpid()), GatewayURL: "https://" + gatewayHost + ":443",
		GatewayCA: g.certs.CAPEM, GatewaySocket: g.sock, Shape: shape})
	if err != nil {
		gs.Close()
		files.remove()
		return nil, err
	}
	return &Slot{p: w.p, box: box, gw: gs, files: files, shape: shape}, nil
}

// Run implements [compute.Warmer]: s's session exported, bound to the slot, taken by the
// slot's worker. It never calls commit (the caller records the start after it). Any error
// means the slot is spent and nothing of s ran.
func (w *Warmer) Run(ctx context.Context, slot compute.WarmSlot, s compute.Spec, _ func(string) error) (compute.Handle, error) {
	// Another target's slot of the same shape runs in that target's container (its image,
	// runtime, CPUs): only the slot's own provider runs it.
	sl, ok := slot.(*Slot)
	if !ok || sl.p != w.p {
		slot.Discard()
		return nil, fmt.Errorf("start %q: not a docker slot of this target: %w", s.ID, compute.ErrSlotShape)
	}
	if !sl.claimed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("start %q: %w", s.ID, ErrSlotClaimed)
	}
	if w.Shape(s) != sl.shape {
		sl.Discard()
		return nil, fmt.Errorf("start %q in docker warm slot: %w", s.ID, compute.ErrSlotShape)
	}
	g := w.g
	// The claim mark is held before the Bind: the slot stands or its mark is held, always.
	release, err := g.holdClaim(sl.gw.ID)
	if err != nil {
		sl.Discard()
		return nil, fmt.Errorf("docker warm slot: %w", err)
	}
	// The dispatch's read-only files go to the slot's read-only places (files.go); only the
	// rest is exported for the worker to fetch.
	exported := s
	exported.Binds, err = sl.files.fill(s.Binds)
	if err != nil {
		sl.Discard()
		release()
		return nil, fmt.Errorf("docker warm slot does not fit: %w", err)
	}
	sess, err := g.reg.Export(ctx, exported)
	if err == nil {
		bctx, cancel := context.WithTimeout(ctx, slotBindWait)
		err = sl.gw.Bind(bctx, sess.Dispatch, sess.Token)
		cancel()
		if err != nil {
			sess.Close()
		}
	}
	if err != nil {
		sl.Discard()
		release()
		return nil, fmt.Errorf("docker warm slot: %w", err)
	}
	files := sl.files
	return newSlotHandle(ctx, sl.box, sess, s.Limits.Timeout, func() { files.remove(); release() }), nil
}

// Reap implements [compute.Warmer]: what killed holders (a resident process, a standby
// supervisor) left of this home's docker slots: their gateway slots revoked, this target's
// slot containers removed, and their claim marks, places and sockets.
func (w *Warmer) Reap(ctx context.Context) error {
	if _, err := os.Stat(w.g.dir); errors.Is(err, os.ErrNotExist) {
		return nil // no holder ever ran here
	}
	return w.g.sweep(ctx, w.p.Provider)
}
