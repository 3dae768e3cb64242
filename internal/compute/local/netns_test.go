package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// netnsProbe prints, one per line: the network namespace ("ns net:[N]"), its interfaces
// ("if NAME"), whether the loopback is up ("loopback refused": a connect to a closed port
// on 127.0.0.1 is refused; down, it is unreachable) and what taking it down gives ("down
// ERR" or "down ok").
func netnsProbe() int {
	printNetNS()
	c, err := net.Dial("tcp", "127.0.0.1:1")
	switch {
	case err == nil:
		c.Close()
		fmt.Println("loopback connected")
	case errors.Is(err, syscall.ECONNREFUSED):
		fmt.Println("loopback refused")
	default:
		fmt.Println("loopback", err)
	}
	fmt.Println("down", setLoopbackFlags(0))
	return 0
}

// printNetNS prints this process's network namespace ("ns net:[N]") and its interfaces
// ("if NAME"), a line each.
func printNetNS() {
	ns, err := os.Readlink("/proc/self/ns/net")
	fmt.Println("ns", ns, err)
	b, _ := os.ReadFile("/proc/net/dev")
	for _, l := range strings.Split(string(b), "\n")[2:] {
		if name, _, ok := strings.Cut(l, ":"); ok {
			fmt.Println("if", strings.TrimSpace(name))
		}
	}
}

// setLoopbackFlags sets lo's flags in this process's network namespace; "ok" when it could.
func setLoopbackFlags(flags uint16) string {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err.Error()
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return err.Error()
	}
	return "ok"
}

// filled waits for p's fill to end: every namespace it set out to make is made or failed.
func filled(p *netnsPool) int {
	for {
		p.mu.Lock()
		n, making := len(p.spare), p.making
		p.mu.Unlock()
		if making == 0 {
			return n
		}
		runtime.Gosched()
	}
}

// awaitSpares waits for p to hold n spares: a start's end fills the pool after the start's
// Wait has returned, on the start's own thread.
func awaitSpares(t testing.TB, p *netnsPool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		k := len(p.spare)
		p.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d spares after 30 s, want %d", k, n)
		}
		runtime.Gosched()
	}
}

// nsInode is the inode of the namespace f keeps.
func nsInode(t testing.TB, f *os.File) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// hostNetNS is the host's network namespace, read on this goroutine's own thread while it
// holds it. Not /proc/self's (the main thread's): a provider's pool, this test's or one an
// earlier test left filling, makes its namespaces on whatever thread its goroutine runs on,
// the main thread too, and moves that thread back a moment later.
func hostNetNS(t testing.TB) uint64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestNetNSPool_EachNamespaceHandedOutOnce(t *testing.T) {
	requireRoot(t)
	var p netnsPool
	p.fill()
	if n := filled(&p); n != netnsSpares {
		t.Fatalf("spares after fill: %d, want %d", n, netnsSpares)
	}
	p.fill() // full: makes none
	if n := filled(&p); n != netnsSpares || p.made != netnsSpares {
		t.Fatalf("a full pool filled again: %d spares, %d made", n, p.made)
	}
	host := hostNetNS(t)
	seen := map[uint64]bool{}
	for range netnsSpares {
		f := p.take()
		if f == nil {
			t.Fatal("take: nil with spares left")
		}
		ino := nsInode(t, f)
		if ino == host || seen[ino] {
			t.Errorf("namespace %d handed out: host's is %d, seen %v", ino, host, seen)
		}
		seen[ino] = true
		f.Close()
	}
	if f := p.take(); f != nil {
		t.Errorf("take from an empty pool: %v", f.Name())
	}
	// This process never ran in them: its threads are all in the host's namespace.
	if got := hostNetNS(t); got != host {
		t.Errorf("this thread's namespace changed to %d", got)
	}
}

func TestRunAs_NetNSMadeAhead(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	requireUserNS(t)
	p := newProvider(t, Options{})
	probe := func(t *testing.T, network bool) map[string]string {
		r := run(t, p, compute.Spec{ID: "netns", Argv: []string{"/probe"}, Env: []string{probeEnv + "=netns"},
			Binds: []compute.Bind{probeBind(t)}, RunAs: testRunAs, Network: network})
		if r.exit.Code != 0 {
			t.Fatalf("probe exited %d: %s %s", r.exit.Code, r.stdout, r.stderr)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			k, v, _ := strings.Cut(l, " ")
			got[k] += v + ";"
		}
		return got
	}
	host := fmt.Sprintf("net:[%d]", hostNetNS(t))
	// The first start finds no spare (bwrap makes the namespace); its end fills the pool.
	probe(t, false)
	for i := range 3 {
		awaitSpares(t, &p.netns, netnsSpares)
		p.netns.mu.Lock()
		var ahead []string
		for _, f := range p.netns.spare {
			ahead = append(ahead, fmt.Sprintf("net:[%d]", nsInode(t, f)))
		}
		p.netns.mu.Unlock()
		got := probe(t, false)
		ns := strings.Fields(got["ns"])[0]
		if !slices.Contains(ahead, ns) {
			t.Errorf("start %d ran in %s, not one of the namespaces made ahead %v", i, ns, ahead)
		}
		// A namespace an earlier start used is freed with it, and its inode number can come
		// back: only the spares, held open, are told apart by theirs.
		if ns == host {
			t.Errorf("start %d ran in the host's namespace %s", i, ns)
		}
		if got["if"] != "lo;" {
			t.Errorf("start %d: interfaces %q, want only lo", i, got["if"])
		}
		if got["loopback"] != "refused;" {
			t.Errorf("start %d: the loopback is not up: %q", i, got["loopback"])
		}
		if got["down"] != "operation not permitted;" {
			t.Errorf("start %d: taking the loopback down gave %q, want operation not permitted", i, got["down"])
		}
	}
	// The host's network takes no spare.
	awaitSpares(t, &p.netns, netnsSpares)
	before := filled(&p.netns)
	if got := probe(t, true); strings.Fields(got["ns"])[0] != host {
		t.Errorf("Network: true ran in %s, not the host's %s", got["ns"], host)
	}
	if after := filled(&p.netns); after != before {
		t.Errorf("Network: true took a spare: %d before, %d after", before, after)
	}
}

func TestBwrapOptions_SharesTheNamespaceMadeAhead(t *testing.T) {
	for _, tt := range []struct {
		network, netns, share bool
	}{{false, false, false}, {false, true, true}, {true, false, true}} {
		o := bwrapOptions(compute.Spec{Network: tt.network}, nil, stagedSystem{netns: tt.netns}, newFDLayout(0), true)
		if got := slices.Contains(o, "--share-net"); got != tt.share {
			t.Errorf("network %v, made ahead %v: --share-net %v, want %v", tt.network, tt.netns, got, tt.share)
		}
		if !slices.Contains(o, "--unshare-all") {
			t.Errorf("network %v, made ahead %v: no --unshare-all", tt.network, tt.netns)
		}
	}
}
