package local

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// A run-as sandbox's network namespace is made before the start that takes it: bwrap's own
// (--unshare-net, then the loopback's setup over netlink) was a millisecond of every cold
// start's critical path. Each namespace is new, holds nothing but its loopback, is joined
// by exactly one sandbox and then let go: taken from the pool, it is never handed out again.
// A start that finds none makes bwrap create one, as before.
//
// The namespace belongs to the host's user namespace (root made it); bwrap's own belongs to
// the user namespace bwrap makes, in which the sandbox's is nested. Either way nothing in
// the sandbox holds a capability over it.

// netnsSpares is how many namespaces a provider keeps made ahead.
const netnsSpares = 2

// netnsPool holds network namespaces made ahead, each by a descriptor of its nsfs file.
type netnsPool struct {
	mu     sync.Mutex
	spare  []*os.File
	making int
	// made is how many namespaces the pool has made (tests).
	made int
}

// take hands over a spare namespace, or nil when none is made. The caller closes it.
func (p *netnsPool) take() *os.File {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.spare)
	if n == 0 {
		return nil
	}
	f := p.spare[n-1]
	p.spare[n-1] = nil
	p.spare = p.spare[:n-1]
	return f
}

// fill makes, in the background, the namespaces the pool lacks.
func (p *netnsPool) fill() {
	p.mu.Lock()
	n := netnsSpares - len(p.spare) - p.making
	p.making += max(n, 0)
	p.mu.Unlock()
	for range n {
		go func() {
			f, err := makeNetNS()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.making--
			if err != nil {
				// No spare: the next start has bwrap make its own, as an unprivileged agora's does.
				return
			}
			p.made++
			p.spare = append(p.spare, f)
		}()
	}
}

// makeNetNS makes a network namespace on this goroutine's thread and moves the thread back
// into the one it was in, so the runtime keeps the thread. It must not end it: every task
// the provider starts carries a parent-death signal, which Linux sends when the thread that
// forked it ends, and this thread may have forked a task (an invoker's sandbox, a `sandbox:
// none` task) that still runs. A thread that cannot move back stays locked, and the runtime
// ends it when the goroutine returns: no other goroutine ever runs in the namespace.
func makeNetNS() (*os.File, error) {
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer unix.Close(home)
	f, err := newNetNS()
	if errors.Is(err, errNotMoved) {
		runtime.UnlockOSThread()
		return nil, err
	}
	if serr := unix.Setns(home, unix.CLONE_NEWNET); serr != nil {
		// Stays locked: ended with the goroutine.
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("move back to this thread's network namespace: %w", serr)
	}
	runtime.UnlockOSThread()
	return f, err
}

// errNotMoved is newNetNS's failure before the thread left its namespace.
var errNotMoved = errors.New("no network namespace made")

// newNetNS moves this (locked) thread into a new network namespace, brings its loopback up
// as bwrap would, and returns a descriptor that keeps the namespace. An error that wraps
// errNotMoved left the thread where it was.
func newNetNS() (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("%w: create a network namespace: %w", errNotMoved, err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the new network namespace: %w", err)
	}
	f := os.NewFile(uintptr(fd), "netns")
	if err := loopbackUp(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// loopbackUp sets IFF_UP on lo in this thread's network namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	return nil
}

// takeNetNS is a namespace made ahead for s's sandbox, or nil: none is made, or s shares
// the host's network.
func (p *Provider) takeNetNS(s compute.Spec) *os.File {
	if s.Network {
		return nil
	}
	return p.netns.take()
}

// joinNetNS moves this (locked) thread into the namespace f keeps, and closes f: from here
// only the thread, and the bwrap it starts, hold it.
func joinNetNS(f *os.File) error {
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join a network namespace made ahead: %w", err)
	}
	return nil
}
