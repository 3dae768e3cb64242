package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Kubernetes warm slots: for a kubernetes target with `warm: N`, N pods started ahead
// (kubernetes.Provider.StartSlot: a Job per slot with its own token Secret and a gateway-only
// NetworkPolicy, the worker in claim mode). The slot's token is a gateway slot's
// (AGORA_HOME/gateway/slots), which the network gateway the pods reach serves (`agora gateway
// serve`, `agora orch serve --gateway`: the same directory); this process holds each slot's
// hold lock, so a holder killed with -9 leaves slots the gateway refuses and the next holder
// sweeps. A claim checks the slot's Job and pod, exports the dispatch's session, binds it to
// the slot (the gateway revokes the slot's token as it hands the grant over) and follows the
// slot's Job as the dispatch's.
//
// Two kinds of holder: a resident Dispatcher ([Dispatcher.StartWarm]) holds N in its pools,
// and orch serve / mcp serve hold them as standby supervisors (standby.go, detach.Standbys),
// one slot each: the standby is the process that created the slot's gateway slot, so its
// hold lock, its token and the claim (w.gw.Bind) are the standby's, and the dispatch handed
// to it runs in that slot with the standby as its supervisor. The gateway serving the pods is
// whichever process serves AGORA_HOME/gateway/slots: the slot store is the directory, not a
// process. serve killed with -9: its standbys read EOF and delete their slots; a standby
// killed with -9: its hold is free, the gateway refuses its token, and the next standby's
// start (serve's SweepWarm) deletes its Job.

// warmK8sTarget says whether a target keeps Kubernetes slots.
func warmK8sTarget(t config.Target) bool {
	return t.Warm > 0 && t.Provider == config.ProviderKubernetes
}

// k8sSlots is the gateway slot store the kubernetes slots' tokens live in.
func (d *Dispatcher) k8sSlots() *netgw.Slots {
	return &netgw.Slots{Dir: filepath.Join(d.gatewayDir(), "slots")}
}

// k8sHomeKeyFile is home.AuditPubFile (a test pins the two equal): random per home, made by
// agora init, public.
const k8sHomeKeyFile = "keys/audit.pub"

// k8sHome is this home's identity on its Kubernetes objects (kubernetes.SlotOptions.Home and
// PoolOptions.Home: the agora.home label of its warm slots and pools, its pools' token
// audience): see k8sHomes.
func (d *Dispatcher) k8sHome() (string, error) {
	ids, err := d.k8sHomes()
	return ids.current, err
}

// k8sHomeIDs are a home's identities on its Kubernetes objects.
type k8sHomeIDs struct {
	// current labels what this agora makes, sweeps and adopts.
	current string
	// former are the labels an older agora gave this home's objects on this host, swept and
	// adopted as current's (never made): at most one, none when it is current.
	former []string
}

// k8sHomes computes this home's Kubernetes identities.
//
// The identity is the home's audit public key (keys/audit.pub) alone, hashed. It must be the
// same for every replica of one home and differ between homes (so homes sharing a namespace
// never sweep or adopt each other's slots):
//   - The key is random per home (agora init) and goes wherever the home goes: a standby that
//     restores the home from object storage runs with the home's own keys (the operator's
//     keys Secret), so the leader it replaces had the same identity, and it adopts the dead
//     leader's claimed slot Jobs and sweeps its unclaimed ones.
//   - The host name is not in it: each replica runs on a pod of its own name, and a home moved
//     to another machine is the same home. The path is not in it either: a home restored or
//     moved to another path is still that home, and two homes at one path are told apart by
//     their keys anyway (two homes on hosts of one name at one path).
//   - What the key does not tell apart is a copy of one home (its keys copied with it): the
//     copy is the same home by every measure agora has (its audit chain signs with that key,
//     its replica segments name it), and like the home's databases it must not run beside the
//     original (HA runs one leader, by its Lease): two copies at once would sweep each other's
//     unclaimed slots.
//
// An older agora hashed the host name, the path and the key file's bytes (former): a slot Job
// made before an upgrade carries that, and is swept and adopted as this home's on the same
// host and path. A home with no key file (one made by hand, a test's) keeps that identity,
// with no key, as before: it has nothing else to be told apart by.
//
// A key file that is there but cannot be read (its permissions, a directory at its path, an
// I/O error) is an error, never that fallback: the home would take another identity for as
// long as the file stays unreadable, and then sweep none of its own slots and pools, adopt
// none of its claimed slot Jobs, and make objects a readable key's replica would not know.
func (d *Dispatcher) k8sHomes() (k8sHomeIDs, error) {
	dir := filepath.Dir(d.StateDir)
	path := filepath.Join(dir, k8sHomeKeyFile)
	key, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// err names the file (a *PathError).
		return k8sHomeIDs{}, fmt.Errorf("this home's identity on Kubernetes is its public audit key (%s, made by agora init), which cannot be read: %w; "+
			"make it a readable file again: without it agora would take this home's warm slots and pools for another home's", k8sHomeKeyFile, err)
	}
	former := hostPathK8sHome(d.hostname(), dir, key)
	pub := strings.TrimSpace(string(key)) // the key's text, however the file's lines end
	if pub == "" {
		return k8sHomeIDs{current: former}, nil
	}
	sum := sha256.Sum256([]byte("agora k8s home\x00" + pub))
	return k8sHomeIDs{current: hex.EncodeToString(sum[:10]), former: []string{former}}, nil
}

// hostPathK8sHome is the identity agora gave a home's Kubernetes objects before its audit key
// alone was (host, AGORA_HOME and the key file's bytes): kept to sweep and adopt what an older
// agora of this home made.
func hostPathK8sHome(host, dir string, key []byte) string {
	sum := sha256.Sum256([]byte(host + "\x00" + dir + "\x00" + string(key)))
	return hex.EncodeToString(sum[:10])
}

// hostname is this machine's name, or the test's (testOnlyHostname): the former identity's.
func (d *Dispatcher) hostname() string {
	if d.testOnlyHostname != "" {
		return d.testOnlyHostname
	}
	host, _ := os.Hostname()
	return host
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
	if !d.leads() {
		return nil // the leader's to sweep (leads)
	}
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
		// Without the home's identity nothing is swept: a guessed one is another home's.
		ids, err := d.k8sHomes()
		if err != nil {
			return fmt.Errorf("kubernetes warm slots: %w", err)
		}
		for _, home := range append([]string{ids.current}, ids.former...) {
			if _, err := p.SweepSlots(ctx, home, live); err != nil {
				d.log().Warn("kubernetes warm slots: sweep", "target", name, "err", err)
			}
		}
	}
	return nil
}

// fillK8s starts one Kubernetes slot of target's template. A root agora runs each cold pod as
// a uid it leases for the dispatch (run.go), so it leases one for the slot too, as for the
// other slots: the pod runs as it, the claiming dispatch takes the lease over (claim) and
// holds it to its end, and no other dispatch of this home runs as it meanwhile. Without root
// neither leases: the cold pod runs as its dispatch id's uid of the range, the slot's pod as
// its slot id's (random, used once): both a hash into the same range.
func (w *WarmPools) fillK8s(ctx context.Context, target string, t config.Target) (*warmSlot, error) {
	w.mu.Lock()
	tmpl := w.tmpl[target]
	w.mu.Unlock()
	p, err := w.d.k8sProvider(ctx, target)
	if err != nil {
		return nil, err
	}
	var lease *uidLease
	if os.Geteuid() == 0 && !w.d.testOnlyInvokingUser {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if lease, err = leaseUID(w.d.StateDir, t.SandboxUID, warmLeasePrefix+hex.EncodeToString(b[:])); err != nil {
			return nil, err
		}
		tmpl.RunAs = &compute.HostUser{UID: lease.uid, GID: lease.uid}
	}
	home, err := w.d.k8sHome()
	if err != nil {
		lease.release()
		return nil, err
	}
	gs, err := w.d.k8sSlots().Create(ctx)
	if err != nil {
		lease.release()
		return nil, err
	}
	sl, err := p.StartSlot(ctx, tmpl, kubernetes.SlotOptions{ID: gs.ID, Token: gs.Token, Home: home, Places: k8sPlaces(tmpl)})
	if err != nil {
		gs.Close()
		lease.release()
		return nil, err
	}
	return &warmSlot{pod: sl, gw: gs, lease: lease, key: tmpl.ID}, nil
}

// k8sPlaces are the read-only places of a slot of tmpl (kubernetes.SlotOptions.Places): the
// binds a docker slot stages (stagedBind: read-only, below the layout root, not the worker
// binary nor the gateway's socket directory, and the system trust store of a dispatch with the
// egress proxy), each a file or a directory as placeIsFile says. The pod mounts each
// read-only; its filler fills them at the claim, the trust store with the
// claiming dispatch's stage's trust file, so a proxy dispatch runs warm.
func k8sPlaces(tmpl compute.Spec) []remote.SlotPlace {
	var out []remote.SlotPlace
	for _, b := range tmpl.Binds {
		if stagedBind(b) {
			out = append(out, remote.SlotPlace{Dst: b.Dst, File: placeIsFile(b)})
		}
	}
	return out
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

// adoptSlotted is adoptSandbox for a dispatch that claimed a Kubernetes warm slot
// (startK8sWarm): no Job is named for it; its recorded task id names the slot's Job, which
// the provider adopts only as this home's slot claimed by this dispatch
// (kubernetes.Provider.AdoptSlot). nil, nil for a target that is not Kubernetes (whether or
// not it keeps warm slots now: a slot claimed before `warm` was turned off still runs) and
// for a task id that names no slot's Job.
func (s *supervision) adoptSlotted(ctx context.Context) (compute.Handle, error) {
	if s.target.Provider != config.ProviderKubernetes {
		return nil, nil
	}
	p, err := s.d.k8sProvider(ctx, s.r.Target)
	if err != nil {
		return nil, err
	}
	ids, err := s.d.k8sHomes()
	if err != nil {
		return nil, err
	}
	a := kubernetes.SlotAdoption{TaskID: s.r.ProviderTaskID, Home: ids.current, Former: ids.former}
	if s.r.StartedAt != nil {
		a.Started = *s.r.StartedAt
	}
	return p.AdoptSlot(ctx, s.spec, a)
}

// standbyK8s starts a kubernetes standby's one slot (standby.go) of the stored template: the
// slot's Job, Secret and NetworkPolicy, its gateway slot held by this process. The holder
// swept what killed holders left before it started this process (detach.Standbys.start).
func (w *WarmPools) standbyK8s(ctx context.Context, target string, t config.Target) (*warmSlot, error) {
	w.mu.Lock()
	tmpl := w.tmpl[target]
	tmpl.ID = kubernetes.SlotShape(tmpl)
	w.tmpl[target] = tmpl
	w.mu.Unlock()
	return w.fillK8s(ctx, target, t)
}

// WarmPods says whether target keeps Kubernetes warm slots (pods: no root needed to hold them).
func (d *Dispatcher) WarmPods(target string) bool {
	if d.Config == nil {
		return false
	}
	t, ok := d.Config.Targets[target]
	return ok && warmK8sTarget(t)
}

// slotBindWait bounds how long a claiming dispatch waits for its slot's worker to take the
// grant; a slot whose worker does not is spent, and the dispatch starts cold.
const slotBindWait = 10 * time.Second

// stagedBind says whether a template bind is a read-only place of a kubernetes slot: read-only,
// below the layout root, neither the slot's own worker binary nor the gateway's socket
// directory (the worker listens there, so it is a directory it writes); and the system trust
// store of a dispatch with the egress proxy (wire.SystemTrustFile, its stage's trust file bound
// over the image's), though outside the layout root. A docker slot's places follow the same
// rule (compute/container/slots).
func stagedBind(b compute.Bind) bool {
	if b.Writable || b.Result {
		return false
	}
	return b.Dst == wire.SystemTrustFile ||
		strings.HasPrefix(b.Dst, wire.DefaultRoot+"/") && b.Dst != wire.BinPath && b.Dst != wire.GatewayPath
}

// placeIsFile says whether the template's bind b is a file: by its source when it still
// stands, else by its place (a bundle's manifest and a runtime binary are files).
func placeIsFile(b compute.Bind) bool {
	if fi, err := os.Stat(b.Src); err == nil {
		return fi.Mode().IsRegular()
	}
	return b.Dst == wire.BundlePath+"/"+wire.ManifestFile || b.Dst == wire.SystemTrustFile || strings.HasPrefix(b.Dst, wire.RuntimeBinDir+"/")
}
