package slots

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/netgw"
)

// gatewayHost is the name the slot gateway's certificate is for; the slots reach it only
// through its socket, so the name is never resolved.
const gatewayHost = "slots.agora.internal"

// gateway is the slot gateway a holder serves for its docker slots.
type gateway struct {
	home  string
	dir   string // AGORA_HOME/gateway
	reg   *netgw.Registry
	slots *netgw.Slots
	certs *netgw.Certs
	sock  string
	stop  context.CancelFunc
	done  chan error

	closeOnce sync.Once
}

// newGateway is home's slot gateway state, not yet serving.
func newGateway(home string) *gateway {
	dir := filepath.Join(home, "gateway")
	return &gateway{home: home, dir: dir, reg: &netgw.Registry{Dir: filepath.Join(dir, "sessions")},
		slots: &netgw.Slots{Dir: filepath.Join(dir, "slots")}}
}

// start sweeps what a killed holder left (its slots revoked, p's containers of them removed)
// and serves the slot gateway on a socket of its own, AGORA_HOME/gateway/slots-RANDOM.sock.
func (g *gateway) start(ctx context.Context, p *container.Provider, version string, log *slog.Logger) error {
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	g.sock, g.done = slotSocketPath(g.dir), make(chan error, 1)
	if err := g.sweep(ctx, p); err != nil {
		return err
	}
	var err error
	if g.certs, err = loadSlotCA(g.dir); err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	ln, err := listenSlotSocket(g.sock)
	if err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	// Any uid may connect: the directory is root's 0700 and only a slot container, which gets
	// the socket file bound in, reaches it; what it can do there is its token's.
	if err := os.Chmod(g.sock, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("docker warm slots: %w", err)
	}
	srv := &netgw.Server{Registry: g.reg, Slots: g.slots, Version: version, Log: log}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stop = stop
	// Each slot runs as a uid of its own: the gateway's per-source caps count its peers by uid.
	go func() { g.done <- srv.Serve(sctx, netgw.PeerListener(ln), g.certs.Server) }()
	return nil
}

// sweep revokes the slots of killed holders, removes p's containers of them and their claim
// marks, places and sockets. A living holder's slots and claimed slots stay (live).
func (g *gateway) sweep(ctx context.Context, p *container.Provider) error {
	if _, err := g.slots.Sweep(ctx); err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	if _, err := p.SweepSlots(ctx, g.home, g.live); err != nil {
		return fmt.Errorf("docker warm slots: %w", err)
	}
	g.sweepSlotFiles()
	g.sweepClaimMarks()
	sweepSlotSockets(ctx, g.dir)
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
	return netgw.LoadOrCreateCA(filepath.Join(dir, "slot-keys"), []string{gatewayHost})
}

// live says whether a slot still stands (its holder lives) or runs a living holder's
// dispatch (its claim mark is held: claimed.go).
func (g *gateway) live(id string) bool {
	_, err := os.Lstat(filepath.Join(g.slots.Dir, id))
	return err == nil || g.claimHeld(id)
}

func (g *gateway) close() {
	if g == nil || g.stop == nil {
		return
	}
	// Once: a second close waited on done forever.
	g.closeOnce.Do(func() {
		g.stop()
		<-g.done
	})
}
