package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Docker warm slots (#30): for a docker target with `warm: N`, N worker containers started
// ahead by the container provider (container.StartSlot: a cold container's hardening, no
// network, the gateway's Unix socket its only way out, the slot's token on fd 3). The resident
// Dispatcher that holds them serves the network gateway on that socket itself (sessions and
// slots are files below AGORA_HOME/gateway, as `agora gateway serve`'s are). A dispatch that
// claims a slot exports its session (its binds become gateway mounts, its secrets a gateway
// file) and binds it to the slot; the slot's worker claims it, fetches the dispatch's files,
// runs, streams its output and uploads its out directory, exactly as a cold remote worker.

// dockerGatewayHost is the name the slot gateway's certificate is for; the slots reach it only
// through its socket, so the name is never resolved.
const dockerGatewayHost = "slots.agora.internal"

// slotBindWait bounds how long a claiming dispatch waits for its slot's worker to take the
// grant; a slot whose worker does not is spent, and the dispatch starts cold.
const slotBindWait = 10 * time.Second

// dockerGateway is the slot gateway a resident Dispatcher serves for its docker slots.
type dockerGateway struct {
	home  string
	reg   *netgw.Registry
	slots *netgw.Slots
	certs *netgw.Certs
	sock  string
	stop  context.CancelFunc
	done  chan error

	closeOnce sync.Once
}

// gatewayDir is AGORA_HOME/gateway: StateDir is AGORA_HOME/dispatches.
func (d *Dispatcher) gatewayDir() string { return filepath.Join(filepath.Dir(d.StateDir), "gateway") }

// startDockerGateway sweeps what a killed holder left (its slots revoked, their containers
// removed) and serves the slot gateway on a socket of its own, AGORA_HOME/gateway/slots-RANDOM.sock.
func (d *Dispatcher) startDockerGateway(ctx context.Context) (*dockerGateway, error) {
	dir := d.gatewayDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("docker warm slots: %w", err)
	}
	g := d.slotGateway()
	g.sock, g.done = slotSocketPath(dir), make(chan error, 1)
	if err := g.sweep(ctx, d); err != nil {
		return nil, err
	}
	var err error
	if g.certs, err = loadSlotCA(dir); err != nil {
		return nil, fmt.Errorf("docker warm slots: %w", err)
	}
	ln, err := listenSlotSocket(g.sock)
	if err != nil {
		return nil, fmt.Errorf("docker warm slots: %w", err)
	}
	// Any uid may connect: the directory is root's 0700 and only a slot container, which gets
	// the socket file bound in, reaches it; what it can do there is its token's.
	if err := os.Chmod(g.sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("docker warm slots: %w", err)
	}
	srv := &netgw.Server{Registry: g.reg, Slots: g.slots, Version: workerremote.VersionOf(d.Worker.Path), Log: slog.New(d.log().Handler())}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stop = stop
	// Each slot runs as a uid of its own: the gateway's per-source caps count its peers by uid.
	go func() { g.done <- srv.Serve(sctx, netgw.PeerListener(ln), g.certs.Server) }()
	return g, nil
}

// slotGateway is this home's slot gateway state, not yet serving.
func (d *Dispatcher) slotGateway() *dockerGateway {
	dir := d.gatewayDir()
	return &dockerGateway{home: filepath.Dir(d.StateDir), reg: &netgw.Registry{Dir: filepath.Join(dir, "sessions")},
		slots: &netgw.Slots{Dir: filepath.Join(dir, "slots")}}
}

// sweep revokes the slots of killed holders, removes their containers (every docker target's)
// and their claim marks and sockets. A living holder's slots and claimed slots stay (live).
func (g *dockerGateway) sweep(ctx context.Context, d *Dispatcher) error {
	if _, err := g.slots.Sweep(ctx); err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	for name, t := range d.Config.Targets {
		if t.Provider != config.ProviderDocker {
			continue
		}
		p, err := d.providerFor(ctx, name)
		if err != nil {
			d.log().Warn("docker warm slots: cannot sweep the target's slot containers", "target", name, "err", err)
			continue
		}
		if cp, ok := p.(*container.Provider); ok {
			if _, err := cp.SweepSlots(ctx, g.home, g.live); err != nil {
				return fmt.Errorf("docker warm slots of target %q: %w", name, err)
			}
		}
	}
	g.sweepSlotFiles()
	g.sweepClaimMarks()
	sweepSlotSockets(ctx, d.gatewayDir())
	return nil
}

// sweepDocker is SweepWarm's part for docker slots: what killed holders (a resident process,
// a standby supervisor) left, when this home has a docker target with warm slots and this
// process could hold them (root).
func (d *Dispatcher) sweepDocker(ctx context.Context) error {
	if d.Config == nil || os.Geteuid() != 0 {
		return nil
	}
	for _, t := range d.Config.Targets {
		if warmDockerTarget(t) {
			if _, err := os.Stat(d.gatewayDir()); errors.Is(err, os.ErrNotExist) {
				return nil // no holder ever ran here
			}
			return d.slotGateway().sweep(ctx, d)
		}
	}
	return nil
}

// loadSlotCA loads the slot gateway's CA and certificate, made the first time. Several
// holders of a home (standby supervisors) start at once: the flock keeps one's key from
// being paired with another's certificate on disk.
func loadSlotCA(dir string) (*netgw.Certs, error) {
	f, err := os.OpenFile(filepath.Join(dir, "slot-keys.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return nil, err
	}
	return netgw.LoadOrCreateCA(filepath.Join(dir, "slot-keys"), []string{dockerGatewayHost})
}

// live says whether a slot still stands (its holder lives) or runs a living holder's
// dispatch (its claim mark is held: warmdocker_claimed.go).
func (g *dockerGateway) live(id string) bool {
	_, err := os.Lstat(filepath.Join(g.slots.Dir, id))
	return err == nil || g.claimHeld(id)
}

func (g *dockerGateway) close() {
	if g == nil {
		return
	}
	// Once: a second close (WarmPools.Close twice) waited on done forever.
	g.closeOnce.Do(func() {
		g.stop()
		<-g.done
	})
}

// warmDockerTarget says whether a target keeps docker slots.
func warmDockerTarget(t config.Target) bool {
	return t.Warm > 0 && t.Provider == config.ProviderDocker && t.Sandbox != compute.SandboxNone
}

// dockerShape is a docker slot's key: the local shape of its spec (everything below /agora
// comes at claim, and so does the system trust store of a dispatch with the egress proxy: it
// counts by its place alone, see stagedBind) and the worker it was started with.
func dockerShape(s compute.Spec) string {
	worker := ""
	for _, b := range s.Binds {
		if b.Dst == wire.BinPath {
			worker = b.Src
		}
	}
	return "docker:" + compute.SlotShape(s, compute.WarmOptions{ClaimRoot: wire.DefaultRoot, PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}, ClaimFiles: claimFiles}) + ":" + worker
}

// fillDocker starts one docker slot of target's template as a uid of its own.
func (w *WarmPools) fillDocker(ctx context.Context, target string, t config.Target) (*warmSlot, error) {
	w.mu.Lock()
	tmpl, g := w.tmpl[target], w.docker
	w.mu.Unlock()
	if g == nil {
		return nil, errors.New("docker warm slots: no slot gateway")
	}
	p, err := w.d.providerFor(ctx, target)
	if err != nil {
		return nil, err
	}
	cp, ok := p.(*container.Provider)
	if !ok {
		return nil, fmt.Errorf("target %q: not a container provider", target)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	lease, err := leaseUID(w.d.StateDir, t.SandboxUID, warmLeasePrefix+hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	// Its working directory is not the workspace: the engine would make that (root's) in the
	// slot's tmpfs before the worker fetches the workspace there.
	spec := compute.Spec{Argv: tmpl.Argv, Dir: "/tmp", Limits: tmpl.Limits, Sandbox: tmpl.Sandbox,
		RunAs: &compute.HostUser{UID: lease.uid, GID: lease.uid}}
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
		lease.release()
		return nil, err
	}
	// After the gateway slot exists: a sweep spares the places of a standing slot.
	files, staged, err := g.stageSlotFiles(gs.ID, tmpl)
	if err != nil {
		gs.Close()
		lease.release()
		return nil, err
	}
	spec.Binds = append(spec.Binds, staged...)
	box, err := cp.StartSlot(ctx, spec, container.SlotOptions{ID: gs.ID, Token: gs.Token, Home: g.home,
		Holder: fmt.Sprintf("pid-%d", os.Getpid()), GatewayURL: "https://" + dockerGatewayHost + ":443",
		GatewayCA: g.certs.CAPEM, GatewaySocket: g.sock, Shape: tmpl.ID})
	if err != nil {
		gs.Close()
		files.remove()
		lease.release()
		return nil, err
	}
	return &warmSlot{box: box, gw: gs, files: files, lease: lease, key: tmpl.ID}, nil
}

// startDockerWarm runs s's spec in its claimed docker slot: its session exported, bound to the
// slot, taken by the slot's worker. started false: the spec did not fit or the worker did not
// take it (the slot is spent, counted) and the caller starts it cold, as the same uid.
func (s *supervision) startDockerWarm(ctx context.Context, w *warmSlot) (compute.Handle, bool) {
	g := s.d.Warm.docker
	// A slot not run is killed, never Discarded: its uid lease is the dispatch's now (s.lease).
	if g == nil || dockerShape(withoutRunAs(s.spec)) != w.key {
		s.d.Warm.missed(s.r.Target)
		w.kill()
		return nil, false
	}
	// The claim mark is held before the Bind: the slot stands or its mark is held, always.
	release, err := g.holdClaim(w.gw.ID)
	if err != nil {
		s.d.Warm.missed(s.r.Target)
		s.d.log().Warn("docker warm slot failed; starting cold", "dispatch", s.r.ID, "err", err)
		w.kill()
		return nil, false
	}
	// The dispatch's read-only files go to the slot's read-only places (warmdocker_files.go);
	// only the rest is exported for the worker to fetch.
	exported := s.spec
	exported.Binds, err = w.files.fill(s.spec.Binds)
	if err != nil {
		s.d.Warm.missed(s.r.Target)
		s.d.log().Warn("docker warm slot does not fit; starting cold", "dispatch", s.r.ID, "err", err)
		w.kill()
		release()
		return nil, false
	}
	sess, err := g.reg.Export(ctx, exported)
	if err == nil {
		bctx, cancel := context.WithTimeout(ctx, slotBindWait)
		err = w.gw.Bind(bctx, sess.Dispatch, sess.Token)
		cancel()
		if err != nil {
			sess.Close()
		}
	}
	if err != nil {
		s.d.Warm.missed(s.r.Target)
		s.d.log().Warn("docker warm slot failed; starting cold", "dispatch", s.r.ID, "err", err)
		w.kill()
		release()
		return nil, false
	}
	files := w.files
	return newSlotHandle(ctx, w.box, sess, s.spec.Limits.Timeout, func() { files.remove(); release() }), true
}

func withoutRunAs(s compute.Spec) compute.Spec {
	s.RunAs = nil
	return s
}

// slotHandle is a claimed docker slot as its dispatch's handle: the container's end, then the
// session closed (what the worker streamed reached the dispatch's logs); killed at the
// dispatch's timeout, counted from the claim, or when the run's context ends.
type slotHandle struct {
	box     *container.Slot
	sess    *remote.Session
	release func() // the claim mark, let go once the container has ended
	once    sync.Once
	stop    func() bool

	mu        sync.Mutex
	timedOut  bool // guarded by mu
	cancelled bool // guarded by mu
}

func newSlotHandle(ctx context.Context, box *container.Slot, sess *remote.Session, timeout time.Duration, release func()) *slotHandle {
	h := &slotHandle{box: box, sess: sess, release: release}
	stopCtx := context.AfterFunc(ctx, func() { h.kill(false) })
	var t *time.Timer
	if timeout > 0 {
		t = time.AfterFunc(timeout, func() { h.kill(true) })
	}
	h.stop = func() bool {
		if t != nil {
			t.Stop()
		}
		return stopCtx()
	}
	return h
}

func (h *slotHandle) kill(timedOut bool) {
	h.mu.Lock()
	if timedOut {
		h.timedOut = true
	} else if !h.timedOut {
		h.cancelled = true
	}
	h.mu.Unlock()
	h.box.Discard()
}

func (h *slotHandle) TaskID() string { return h.box.Handle().TaskID() }

func (h *slotHandle) Wait() (compute.Exit, error) {
	exit, err := h.box.Handle().Wait()
	h.once.Do(func() {
		h.release()
		h.stop()
		if cerr := h.sess.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close the slot's gateway session: %w", cerr)
		}
	})
	h.mu.Lock()
	exit.TimedOut = exit.TimedOut || h.timedOut
	exit.Cancelled = exit.Cancelled || h.cancelled
	h.mu.Unlock()
	if exit.Code == remote.ExitGatewayUnreachable {
		exit.GatewayUnreachable = true
	}
	return exit, err
}

// standbyDocker starts a docker standby's one slot (standby.go): this process serves the slot
// gateway on a socket of its own, after sweeping what killed holders left, and starts one slot
// container of the stored template. stop ends the gateway; the standby calls it after its slot
// (or its claimed dispatch's container) has ended. The standby is the slot's holder: its
// gateway slot's hold, its claim mark and its socket are this process's, so the slot is
// claimed by none but the dispatch handed to it, and swept once this process is gone.
func (w *WarmPools) standbyDocker(ctx context.Context, target string, t config.Target) (*warmSlot, func(), error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("docker warm slots need a root agora (each slot runs as a uid of the target's sandbox_uid range)")
	}
	g, err := w.d.startDockerGateway(ctx)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	tmpl := w.tmpl[target]
	tmpl.ID = dockerShape(tmpl)
	w.tmpl[target] = tmpl
	w.docker = g
	w.mu.Unlock()
	slot, err := w.fillDocker(ctx, target, t)
	if err != nil {
		g.close()
		return nil, nil, err
	}
	return slot, g.close, nil
}
