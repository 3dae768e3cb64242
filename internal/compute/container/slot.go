package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Warm slots on docker/podman. A slot container is started ahead of any dispatch from
// the same hardened create request as a cold container (createOptions: the digest-checked
// image, the slot's own non-root uid, every capability dropped, seccomp, read-only root,
// limits, network mode "none"), in claim mode: its worker holds only the slot's token and
// asks the network gateway for its dispatch (internal/netgw slot.go). What differs:
//
//   - The only way out is the gateway's Unix socket, bound read-only at [SlotSocketPath]:
//     the container still has no network at all (network mode none), so it reaches nothing
//     but the gateway, whose routes its token opens only once.
//   - The token travels on stdin to fd 3 (fdpass), as a cold container's secrets do: never in
//     argv, the environment (which `docker inspect` shows), a label, the name or a log.
//   - Labels name the slot, the agora home and the holder ([LabelSlot], [LabelHome],
//     [LabelHolder]), never a dispatch: [Provider.Cancel] touches only agora.dispatch
//     containers, and [Provider.SweepSlots] finds a killed holder's slots by its home.
//   - It is used once: claimed or not, the container ends and is removed; nothing restarts it.

// Slot labels.
const (
	// LabelSlot carries the slot id (not a secret: the token is).
	LabelSlot = "agora.slot"
	// LabelHome carries [HomeLabel] of the agora home whose gateway the slot claims through.
	LabelHome = "agora.home"
	// LabelHolder names the process that holds the slot (its hold lock in the slots
	// directory); for the operator's eyes: the sweep decides by the lock, not by this.
	LabelHolder = "agora.holder"
)

// SlotRoot is the sandbox layout's root (wire.DefaultRoot): a slot's tmpfs, where its worker
// fetches its dispatch's files at claim.
const SlotRoot = "/agora"

// SlotSocketPath is where the gateway's Unix socket is bound in a slot container.
const SlotSocketPath = "/agora-gateway.sock"

// SlotOptions say which slot a container is started for.
type SlotOptions struct {
	// ID is the slot's id (netgw.Slot.ID): the container is "agora-slot-ID".
	ID string
	// Token is the slot's bearer token: written to the container's stdin, read by the worker
	// on fd 3. Never anywhere else.
	Token string
	// Home is the agora home's directory (labelled as [HomeLabel]); Holder names the holder.
	Home, Holder string
	// GatewayURL and GatewayCA are the gateway's https URL (its host names the certificate)
	// and the PEM certificate the worker trusts: public, passed in the environment.
	GatewayURL string
	GatewayCA  []byte
	// GatewaySocket is the host path of the gateway's Unix socket for this slot. It must be
	// connectable by the spec's RunAs uid; it is bound read-only at [SlotSocketPath].
	GatewaySocket string
	// Shape is the pool's key for this slot (warm.Slot's Shape).
	Shape string
	// Stdout and Stderr receive the container's own output (the worker tees its dispatch's
	// output to the gateway); nil discards.
	Stdout, Stderr io.Writer
}

// HomeLabel is the value of [LabelHome] for the home at dir: a hash of its absolute path, so
// a label says which home a slot belongs to without naming the path.
func HomeLabel(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:8])
}

// Slot is one started slot container. It implements warm.Slot.
type Slot struct {
	// ID is the slot's id.
	ID    string
	shape string
	h     *handle
}

// StartSlot starts a slot container for s (the worker's argv, RunAs, limits, environment and
// read-only binds, as a cold dispatch's spec; s.Files must be empty, s.ID is ignored) and
// returns once it runs.
func (p *Provider) StartSlot(ctx context.Context, s compute.Spec, o SlotOptions) (*Slot, error) {
	if !remote.ValidSlotID(o.ID) {
		return nil, fmt.Errorf("start slot container: slot id %q is not valid", o.ID)
	}
	if o.Token == "" || o.GatewayURL == "" || len(o.GatewayCA) == 0 || o.Home == "" {
		return nil, errors.New("start slot container: a slot needs its token, the gateway's URL and CA, and the home")
	}
	if !path.IsAbs(o.GatewaySocket) || strings.ContainsAny(o.GatewaySocket, ",\n\x00") {
		return nil, fmt.Errorf("start slot container: gateway socket %q must be an absolute path", o.GatewaySocket)
	}
	if fi, err := os.Lstat(o.GatewaySocket); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("start slot container: gateway socket %q is not a socket", o.GatewaySocket)
	}
	if len(s.Files) != 0 {
		return nil, errors.New("start slot container: a slot gets no files before its claim; its token is its only one")
	}
	for _, b := range s.Binds {
		if b.Writable {
			return nil, fmt.Errorf("start slot container: bind %q is writable; a slot's binds are read-only (its dispatch's files come over the gateway)", b.Dst)
		}
	}
	opts, iso, err := p.slotCreateOptions(s, o)
	if err != nil {
		return nil, err
	}
	token := []byte(o.Token)
	// The container outlives ctx (the pool's fill): it ends when discarded or when its
	// dispatch's worker exits.
	h, err := p.startCreated(ctx, context.WithoutCancel(ctx), opts, iso, token, o.Stdout, o.Stderr, 0)
	clear(token)
	if err != nil {
		return nil, err
	}
	return &Slot{ID: o.ID, shape: o.Shape, h: h}, nil
}

// slotCreateOptions is createOptions for s as slot o's container (see the file's comment).
func (p *Provider) slotCreateOptions(s compute.Spec, o SlotOptions) (client.ContainerCreateOptions, string, error) {
	s.ID = o.ID
	// One file, the token, on fd 3: createOptions then runs the argv through fdpass and opens
	// the container's stdin, exactly as for a cold container's secrets.
	s.Files = []*os.File{nil}
	s.Env = append(append([]string(nil), s.Env...),
		remote.SlotEnv+"="+o.ID,
		remote.GatewayURLEnv+"="+o.GatewayURL,
		remote.CAEnv+"="+string(o.GatewayCA),
		remote.GatewaySocketEnv+"="+SlotSocketPath,
	)
	opts, iso, err := p.createOptions(s)
	if err != nil {
		return client.ContainerCreateOptions{}, "", err
	}
	// The dispatch's layout is fetched at claim into a tmpfs the slot's uid can write (the cold
	// container's binds; the slot's own read-only binds, its worker, are mounted over it).
	// Owned by the slot's uid, mode 0700: podman says so with "U" (it refuses uid=) and must be
	// told not to copy the image's /agora up (its root-owned mode would come along); Docker
	// takes the kernel's uid=/gid= and copies nothing up (only podman is tested here).
	tmpfs := fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=0700,", withDefaults(s.Limits).Scratch)
	if p.podman {
		tmpfs += "notmpcopyup,U"
	} else {
		tmpfs += fmt.Sprintf("uid=%d,gid=%d", s.RunAs.UID, s.RunAs.GID)
	}
	opts.HostConfig.Tmpfs[SlotRoot] = tmpfs
	opts.Name = "agora-slot-" + o.ID
	opts.Config.Labels = map[string]string{LabelSlot: o.ID, LabelHome: HomeLabel(o.Home), LabelHolder: o.Holder}
	opts.HostConfig.Mounts = append(opts.HostConfig.Mounts, mount.Mount{
		Type: mount.TypeBind, Source: o.GatewaySocket, Target: SlotSocketPath, ReadOnly: true,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
	})
	return opts, iso, nil
}

// Shape implements warm.Slot.
func (s *Slot) Shape() string { return s.shape }

// Alive says whether the container still runs (a slot killed from outside is not handed out).
func (s *Slot) Alive() bool {
	select {
	case <-s.h.done:
		return false
	default:
		return true
	}
}

// Discard implements warm.Slot: the container is killed and removed. The caller revokes the
// slot's token (netgw.Slot.Close) first, so nothing is claimed meanwhile.
func (s *Slot) Discard() {
	s.h.p.kill(s.h.id)
	<-s.h.done
}

// Handle is the claimed slot's container as a dispatch's handle: Wait returns how it ended
// (it is removed then). Cancel a claimed slot's dispatch with [Slot.Discard].
func (s *Slot) Handle() compute.Handle { return s.h }

// SweepSlots removes the slot containers of home (by [LabelHome]) whose slot live says is no
// longer held: after a holder's kill -9, netgw's Slots.Sweep has revoked their tokens, and
// their containers, left waiting on a claim that can never come, go here. It returns the
// slot ids removed.
func (p *Provider) SweepSlots(ctx context.Context, home string, live func(slotID string) bool) ([]string, error) {
	res, err := listContainers(ctx, p.cli, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelHome+"="+HomeLabel(home)),
	})
	if err != nil {
		return nil, fmt.Errorf("list slot containers: %w", err)
	}
	var gone []string
	var errs []error
	for _, c := range res.Items {
		id := c.Labels[LabelSlot]
		if !remote.ValidSlotID(id) || live(id) {
			continue
		}
		if err := p.remove(c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, id)
	}
	return gone, errors.Join(errs...)
}
