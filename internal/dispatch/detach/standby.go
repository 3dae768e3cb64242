package detach

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// Standbys are the warm slots of a serve: for each local or docker target with `warm: N`, N
// standby supervisors (`agora dispatch supervise --standby TARGET`, dispatch.Standby), each a
// detached process with agora.db open and one slot of the target's template started as its
// own (a bubblewrap sandbox, a slot container), waiting
// on a socketpair whose other end only this process holds. A dispatch claims one by handing
// it its id; from there the standby is the cold supervisor with a sandbox already made, and
// outlives serve as a cold one does. When this process ends (Close, or kill -9) every
// unclaimed standby reads EOF, kills its slot and exits.
//
// A target's standbys start once it has a template (the shape of its last cold dispatch,
// which its supervisor saved); until then, and whenever none is ready, dispatches start cold,
// counted.
type Standbys struct {
	bin      string
	stateDir string
	targets  map[string]int
	log      *slog.Logger
	ctx      context.Context
	// sweep removes what dead standbys left (dispatch.Dispatcher.SweepWarm): a standby
	// killed with -9 while it ran a dispatch leaves its slot's directory.
	sweep func(context.Context) error

	mu     sync.Mutex
	pools  map[string]*warm.Pool // guarded by mu: by target, once it has a template
	shapes map[string]string     // guarded by mu: the shape each pool was last claimed by
	cold   map[string]uint64     // guarded by mu: claims before the target had a pool
	misfit map[string]uint64     // guarded by mu: claimed standbys whose dispatch started cold
	closed bool                  // guarded by mu

	// keeper makes and refreshes the pools of the `warm_pool` targets (dispatch.PoolKeeper):
	// no standby holds their pods; each dispatch's own supervisor claims one.
	keeper *dispatch.PoolKeeper
	pooled map[string]bool
}

// standbyReadyWithin bounds a standby's start: a Go start, agora.db, a sandbox.
const standbyReadyWithin = time.Minute

// claimAnswerWithin bounds the wait for a standby's answer to a claim.
const claimAnswerWithin = 10 * time.Second

// NewStandbys sweeps what dead holders left of warm slots and returns the standbys of d's
// warm local targets; nil when there are none, or this process is not root (slots attach a
// dispatch's files with mounts). Close them when the process stops serving.
func NewStandbys(ctx context.Context, d *dispatch.Dispatcher, log *slog.Logger) (*Standbys, error) {
	return newStandbys(ctx, d, log, false)
}

// NewLocalStandbys is NewStandbys without the slots and pools of kubernetes targets: the
// resident dispatcher (`agora dispatch resident`), which an `agora dispatch run` starts
// unasked, keeps no pods in a cluster; it stages bubblewrap (and docker) slots only.
func NewLocalStandbys(ctx context.Context, d *dispatch.Dispatcher, log *slog.Logger) (*Standbys, error) {
	return newStandbys(ctx, d, log, true)
}

func newStandbys(ctx context.Context, d *dispatch.Dispatcher, log *slog.Logger, local bool) (*Standbys, error) {
	if err := d.SweepWarm(ctx); err != nil {
		return nil, err
	}
	targets := d.WarmTargets()
	if local {
		for name := range targets {
			if d.WarmPool(name) {
				delete(targets, name)
			}
		}
	}
	if os.Geteuid() != 0 {
		// Bubblewrap and docker slots need root (mounts, a uid of the target's range); a
		// kubernetes target's slots are pods, which any user of the home may hold.
		for name := range targets {
			if !d.WarmPool(name) {
				delete(targets, name)
			}
		}
	}
	pooled := map[string]bool{}
	for name := range targets {
		if d.WarmPool(name) {
			pooled[name] = true
			delete(targets, name)
		}
	}
	var keeper *dispatch.PoolKeeper
	if !local {
		keeper = d.KeepPools(ctx)
	}
	if len(targets) == 0 && keeper == nil {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Standbys{bin: d.AgoraBin, stateDir: d.StateDir, targets: targets, log: log, ctx: context.WithoutCancel(ctx), sweep: d.SweepWarm,
		pools: map[string]*warm.Pool{}, shapes: map[string]string{}, cold: map[string]uint64{}, misfit: map[string]uint64{},
		keeper: keeper, pooled: pooled}
	for target := range targets {
		s.prime(target) // a target that had cold dispatches before this serve fills at once
	}
	return s, nil
}

// prime starts target's standbys if it has a template now (after a cold dispatch).
func (s *Standbys) prime(target string) {
	if s != nil && s.pooled[target] {
		s.keeper.Kick() // a cold dispatch of a pool target saved its shape: the pool follows it
		return
	}
	if s == nil || s.targets[target] == 0 {
		return
	}
	if shape, err := dispatch.WarmShape(s.stateDir, target); err == nil {
		s.pool(target, shape)
	}
}

// claim hands dispatch id of target to a ready standby and returns two channels: exited,
// closed when that standby exits, and ended, closed when it says the dispatch's end is
// committed (StandbyEnded), which comes before its exit; false when none took it (the caller
// starts a cold supervisor).
func (s *Standbys) claim(target, id string) (exited, ended <-chan struct{}, ok bool) {
	if s == nil || s.targets[target] == 0 {
		return nil, nil, false
	}
	shape, err := dispatch.WarmShape(s.stateDir, target)
	if err != nil {
		if !errors.Is(err, dispatch.ErrNoTemplate) {
			s.log.Warn("warm slots: read the target's template", "target", target, "err", err)
		}
		s.mu.Lock()
		s.cold[target]++
		s.mu.Unlock()
		return nil, nil, false
	}
	p := s.pool(target, shape)
	if p == nil {
		return nil, nil, false
	}
	sb, _ := p.Claim(shape).(*standby)
	if sb == nil {
		return nil, nil, false
	}
	if err := sb.hand(id); err != nil {
		s.log.Warn("warm slots: a standby did not take its claim; starting cold", "target", target, "dispatch", id, "err", err)
		sb.kill()
		// A refusal is mostly staleness (agora.yaml or the binary changed since the standbys
		// started), which the others share: they are replaced.
		p.Flush()
		return nil, nil, false
	}
	go s.watch(target, sb)
	return sb.exited, sb.ended, true
}

// pool returns target's pool, started the first time, flushed when the target's shape
// changed since the last claim.
func (s *Standbys) pool(target, shape string) *warm.Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	p := s.pools[target]
	if p == nil {
		p = warm.New(s.ctx, target, s.targets[target], func(ctx context.Context) (warm.Slot, error) {
			return s.start(ctx, target)
		})
		s.pools[target] = p
	} else if s.shapes[target] != shape {
		p.Flush()
	}
	s.shapes[target] = shape
	return p
}

// prune has target's pool drop its dead standbys and refill.
func (s *Standbys) prune(target string) {
	s.mu.Lock()
	p := s.pools[target]
	s.mu.Unlock()
	if p != nil {
		p.Prune()
	}
}

// Counts returns every warm target's numbers, for doctor, metrics and the web view.
func (s *Standbys) Counts() []warm.Counts {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []warm.Counts
	for name, want := range s.targets {
		c := warm.Counts{Target: name, Want: want}
		if p := s.pools[name]; p != nil {
			c = p.Counts()
		}
		// A misfit spent its standby (claimed, as the in-process pools count a spent slot)
		// and ran cold: counted a cold fallback too.
		c.Cold += s.cold[name] + s.misfit[name]
		out = append(out, c)
	}
	return append(out, s.keeper.Counts()...)
}

// Close stops the refills and discards every ready standby. Claimed ones run on.
func (s *Standbys) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	pools := s.pools
	s.pools = map[string]*warm.Pool{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(p.Close)
	}
	wg.Go(s.keeper.Close)
	wg.Wait()
}

// standby is one started standby supervisor. It implements warm.Slot.
type standby struct {
	cmd    *exec.Cmd
	conn   *net.UnixConn
	r      *bufio.Reader
	shape  string
	exited chan struct{}
	// ended is closed by watch when the claimed standby says its dispatch ended.
	ended chan struct{}
}

func (b *standby) Shape() string { return b.shape }

// Settled implements the pool's settler: a claimed standby holds back its pool's refill until
// it exits (its dispatch ended, recorded, agora.db closed), or a while (warm.refillHeldAtMost):
// a refill started at the claim ran beside the claimed dispatch on the same cores.
func (b *standby) Settled() <-chan struct{} { return b.exited }

// Alive says whether the standby still runs (it exits when its slot dies).
func (b *standby) Alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Discard implements warm.Slot: the standby reads EOF, kills its slot and exits; one that
// does not within a few seconds is killed (its slot dies with it, and the next serve's
// sweep removes its directory).
func (b *standby) Discard() {
	b.conn.Close()
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		b.kill()
	}
}

func (b *standby) kill() {
	b.conn.Close()
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.exited
}

// hand sends the claim and waits for the standby's answer. Claimed, the connection stays
// open for what the standby says of the dispatch (watch); nothing more is sent on it: a
// standby takes one id.
func (b *standby) hand(id string) error {
	_ = b.conn.SetDeadline(time.Now().Add(claimAnswerWithin))
	if _, err := fmt.Fprintf(b.conn, "claim %s\n", id); err != nil {
		b.conn.Close()
		return err
	}
	l, err := readStandbyLine(b.r)
	if err != nil {
		b.conn.Close()
		return err
	}
	if l != "claimed "+id {
		b.conn.Close()
		return fmt.Errorf("standby answered %q", l)
	}
	_ = b.conn.SetDeadline(time.Time{})
	return nil
}

// watch reads what a claimed standby of target says until it exits: a dispatch that did not
// fit its slot started cold, and is counted a cold fallback, not a warm claim.
func (s *Standbys) watch(target string, b *standby) {
	defer b.conn.Close()
	for {
		l, err := readStandbyLine(b.r)
		if err != nil {
			return
		}
		switch l {
		case dispatch.StandbyCold:
			s.mu.Lock()
			s.misfit[target]++
			s.mu.Unlock()
		case dispatch.StandbyEnded:
			select {
			case <-b.ended: // said twice: the first was enough
			default:
				close(b.ended)
			}
		}
	}
}

// start starts one standby of target and waits until its slot is ready.
func (s *Standbys) start(ctx context.Context, target string) (warm.Slot, error) {
	if err := s.sweep(ctx); err != nil {
		s.log.Warn("warm slots: sweep what dead standbys left", "err", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start standby supervisor: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "standby"), os.NewFile(uintptr(fds[1]), "holder")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("start standby supervisor: %w", err)
	}
	conn := fc.(*net.UnixConn)
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer devnull.Close()
	// Its stderr is the home's supervisors' log, as a cold supervisor's (spawn): a claimed
	// standby is one.
	stderr, lerr := supervisorStderr(s.stateDir)
	if lerr != nil {
		s.log.Warn("warm slots: a standby's stderr goes to /dev/null", "err", lerr)
	}
	if stderr == nil {
		stderr = devnull
	} else {
		defer stderr.Close()
	}
	c := exec.Command(s.bin, "dispatch", "supervise", "--standby", target)
	c.Stdin, c.Stdout, c.Stderr = devnull, devnull, stderr
	c.ExtraFiles = []*os.File{theirs} // fd 3
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A leader's child keeps its fence (fencefile); no other inherits one by accident.
	c.Env = fencefile.ChildEnv(os.Environ())
	if err := c.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("start standby supervisor: %w", err)
	}
	// The standby's end is its own from here: held open in this process too, a standby that
	// died before its ready line (killed with -9 while it made its slot) was not seen until
	// standbyReadyWithin passed, and the pool stood short for that minute.
	theirs.Close()
	b := &standby{cmd: c, conn: conn, r: bufio.NewReaderSize(conn, 512), exited: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		c.Wait()
		close(b.exited)
		// A standby killed with -9 leaves its slot (a bubblewrap slot's directory, a docker
		// slot's container and places): swept now. Before, only the next standby's start swept,
		// which under load could come long after or never (a retry that found no standby ready
		// started cold; TestServe_Kill9ClaimedStandby failed so at load 16-24).
		if err := s.sweep(s.ctx); err != nil {
			s.log.Warn("warm slots: sweep what an exited standby left", "err", err)
		}
		// A standby that exits while it waits (its slot died) leaves the pool short: have it
		// refilled now rather than when a dispatch finds it dead.
		s.prune(target)
	}()
	_ = conn.SetReadDeadline(time.Now().Add(standbyReadyWithin))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	l, err := readStandbyLine(b.r)
	stop()
	if err == nil {
		_ = conn.SetReadDeadline(time.Time{})
		if shape, ok := strings.CutPrefix(l, "ready "); ok && shape != "" {
			b.shape = shape
			return b, nil
		}
		err = fmt.Errorf("%s", strings.TrimPrefix(l, "failed "))
	}
	if ctx.Err() != nil {
		// serve is closing while this standby starts: let it read EOF and remove its slot
		// (Discard; killed after a few seconds) rather than kill it mid-start, which left the
		// slot's mounts to the next serve's sweep (a prestarted slot's start is longer, so a
		// serve stopped right after a claim hit this: TestHandoff_WarmSlot's cleanup).
		b.Discard()
	} else {
		b.kill()
	}
	return nil, fmt.Errorf("standby supervisor of target %q: %w", target, err)
}

// readStandbyLine reads one line of at most 512 bytes from a standby.
func readStandbyLine(r *bufio.Reader) (string, error) {
	l, err := r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(l), "\n"), nil
}
