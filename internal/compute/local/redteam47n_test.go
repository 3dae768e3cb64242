package local

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the network namespaces made ahead of run-as starts (netns.go). The adversary is
// the agent in the sandbox, and the provider's own concurrency: every namespace is joined by
// one sandbox at most, never one a sandbox has used, no descriptor of one reaches a sandbox,
// no thread of the provider other than the start's own ever runs in one, nothing in it lets
// the agent configure it, and the paths that must not take one (host network, invoker's
// sandbox, warm slots) do not.
//
// Namespaces are compared by inode, and every namespace compared is kept alive by a
// descriptor the test holds: a freed namespace's inode is handed to the next one made.
//
// Probe mode "netns47n" (probe) runs netns47nProbe inside the sandbox.

const probe47n = "netns47n"

// netns47nProbe dispatches the probe's subcommands.
func netns47nProbe(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "netns47n: no subcommand")
		return 2
	}
	switch args[0] {
	case "ns":
		ns, err := os.Readlink("/proc/self/ns/net")
		fmt.Println("ns", ns, err)
		return 0
	case "hold":
		return netns47nHold()
	case "attack":
		return netns47nAttack()
	case "listen":
		return netns47nListen(args[1])
	case "reach":
		return netns47nReach(args[1:])
	default:
		fmt.Fprintln(os.Stderr, "netns47n: unknown subcommand", args[0])
		return 2
	}
}

// netns47nHold prints its network namespace, its interfaces and every descriptor it holds,
// then "held", and waits for EOF on fd 3.
func netns47nHold() int {
	printNetNS()
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Println("fd", e.Name(), l)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.NewFile(3, "hold"))
	return 0
}

// netns47nListen listens on the abstract socket @name and on a TCP port of 127.0.0.1,
// connects to both itself (the probe's control), prints "listening PORT", and waits for EOF
// on fd 3; then it prints how many connections it accepted.
func netns47nListen(name string) int {
	ul, err := net.Listen("unix", "@"+name)
	if err != nil {
		fmt.Println("listen unix:", err)
		return 1
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen tcp:", err)
		return 1
	}
	var accepted atomic.Int32
	got := make(chan struct{}, 64)
	for _, l := range []net.Listener{ul, tl} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
				select {
				case got <- struct{}{}:
				default:
				}
			}
		}()
	}
	for _, a := range []net.Addr{ul.Addr(), tl.Addr()} {
		c, err := net.DialTimeout(a.Network(), a.String(), 2*time.Second)
		if err != nil {
			fmt.Println("self", a.Network(), err)
			return 1
		}
		c.Close()
		fmt.Println("self", a.Network(), "ok")
	}
	for range 2 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			fmt.Println("self: not accepted")
			return 1
		}
	}
	fmt.Println("listening", tl.Addr().(*net.TCPAddr).Port)
	_, _ = io.Copy(io.Discard, os.NewFile(3, "hold"))
	fmt.Println("accepted", accepted.Load())
	return 0
}

// netns47nReach tries each target ("unix:NAME", an abstract socket, or "tcp:ADDR") and
// prints "reach TARGET ok" or the error; for an abstract socket it also prints whether
// /proc/net/unix lists it ("listed NAME yes|no").
func netns47nReach(targets []string) int {
	table, _ := os.ReadFile("/proc/net/unix")
	for _, tg := range targets {
		kind, addr, _ := strings.Cut(tg, ":")
		if kind == "unix" {
			listed := "no"
			for _, l := range strings.Split(string(table), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == "@"+addr {
					listed = "yes"
				}
			}
			fmt.Println("listed", addr, listed)
			addr = "@" + addr
		}
		c, err := net.DialTimeout(kind, addr, 2*time.Second)
		if err != nil {
			fmt.Println("reach", tg, err)
			continue
		}
		c.Close()
		fmt.Println("reach", tg, "ok")
	}
	return 0
}

// netns47nAttack tries what configuring a network namespace takes (CAP_NET_ADMIN,
// CAP_NET_RAW, CAP_NET_BIND_SERVICE over its owner): ioctls on lo, rtnetlink and nfnetlink
// changes, raw and packet sockets, privileged socket options, net sysctls, a namespace of
// its own. It prints "ESCAPED WHAT" for any that works, "denied WHAT: ERR" otherwise, and
// "control ..." lines that show the probe's means work.
func netns47nAttack() int {
	ns, err := os.Readlink("/proc/self/ns/net")
	fmt.Println("ns", ns, err)
	try := func(what string, err error) {
		if err == nil {
			fmt.Println("ESCAPED", what)
		} else {
			fmt.Println("denied", what+":", err)
		}
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		fmt.Println("control lo:", err)
		return 1
	}
	fmt.Println("control lo-up", lo.Flags&net.FlagUp != 0)
	fmt.Println("control getlink", errText47n(nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_GETLINK, unix.NLM_F_DUMP, make([]byte, unix.SizeofIfInfomsg))))

	// ioctls on lo.
	try("SIOCSIFFLAGS lo down", ifIoctl47n(unix.SIOCSIFFLAGS, func(r *unix.Ifreq) { r.SetUint16(0) }))
	try("SIOCSIFMTU lo", ifIoctl47n(unix.SIOCSIFMTU, func(r *unix.Ifreq) { r.SetUint32(1280) }))
	try("SIOCSIFADDR lo", ifIoctl47n(unix.SIOCSIFADDR, func(r *unix.Ifreq) {
		_ = r.SetInet4Addr([]byte{10, 47, 0, 9})
	}))

	// rtnetlink.
	idx := uint32(lo.Index)
	ifa := func(a [4]byte, plen uint8) []byte {
		b := []byte{unix.AF_INET, plen, 0, unix.RT_SCOPE_HOST, 0, 0, 0, 0}
		binary.NativeEndian.PutUint32(b[4:], idx)
		return append(append(b, rtattr47n(unix.IFA_LOCAL, a[:])...), rtattr47n(unix.IFA_ADDRESS, a[:])...)
	}
	try("RTM_NEWADDR 10.47.0.1/32 on lo", nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, ifa([4]byte{10, 47, 0, 1}, 32)))
	try("RTM_DELADDR 127.0.0.1/8 from lo", nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_DELADDR, 0, ifa([4]byte{127, 0, 0, 1}, 8)))
	ifi := func(index int32, flags, change uint32) []byte {
		b := make([]byte, unix.SizeofIfInfomsg)
		b[0] = unix.AF_UNSPEC
		binary.NativeEndian.PutUint32(b[4:], uint32(index))
		binary.NativeEndian.PutUint32(b[8:], flags)
		binary.NativeEndian.PutUint32(b[12:], change)
		return b
	}
	try("RTM_SETLINK lo down", nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_SETLINK, 0, ifi(int32(idx), 0, unix.IFF_UP)))
	for _, kind := range []string{"dummy", "veth", "bridge"} {
		body := append(ifi(0, 0, 0), rtattr47n(unix.IFLA_IFNAME, []byte("agora47n\x00"))...)
		body = append(body, rtattr47n(unix.IFLA_LINKINFO, rtattr47n(unix.IFLA_INFO_KIND, []byte(kind+"\x00")))...)
		try("RTM_NEWLINK "+kind, nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body))
	}
	rt := []byte{unix.AF_INET, 24, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_LINK, unix.RTN_UNICAST, 0, 0, 0, 0}
	oif := binary.NativeEndian.AppendUint32(nil, idx)
	rt = append(append(rt, rtattr47n(unix.RTA_DST, []byte{10, 47, 1, 0})...), rtattr47n(unix.RTA_OIF, oif)...)
	try("RTM_NEWROUTE 10.47.1.0/24 dev lo", nlRequest47n(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, rt))

	// nfnetlink: nf_tables.
	nft := append([]byte{unix.AF_INET, 0, 0, 0}, rtattr47n(unix.NFTA_TABLE_NAME, []byte("agora47n\x00"))...)
	try("nft NEWTABLE", nlRequest47n(unix.NETLINK_NETFILTER, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, nft))

	// Sockets the unprivileged may not open.
	sock := func(domain, typ, proto int) error {
		s, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(s)
		}
		return err
	}
	try("raw IPv4 socket", sock(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP))
	try("raw IPv6 socket", sock(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6))
	try("packet socket", sock(unix.AF_PACKET, unix.SOCK_RAW, int(htons47n(unix.ETH_P_ALL))))
	try("ICMP ping socket", sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP))
	try("bind 127.0.0.1:80", func() error {
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("(socket) %w", err)
		}
		defer unix.Close(s)
		return unix.Bind(s, &unix.SockaddrInet4{Port: 80, Addr: [4]byte{127, 0, 0, 1}})
	}())
	for _, o := range []struct {
		name              string
		level, opt, value int
	}{
		{"SO_MARK", unix.SOL_SOCKET, unix.SO_MARK, 47},
		{"SO_PRIORITY 7", unix.SOL_SOCKET, unix.SO_PRIORITY, 7},
		{"SO_RCVBUFFORCE", unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1 << 20},
		{"IP_TRANSPARENT", unix.SOL_IP, unix.IP_TRANSPARENT, 1},
	} {
		try("setsockopt "+o.name, func() error {
			s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("(socket) %w", err)
			}
			defer unix.Close(s)
			return unix.SetsockoptInt(s, o.level, o.opt, o.value)
		}())
	}

	// Net sysctls, rewritten with the value they hold.
	for _, p := range []string{
		"/proc/sys/net/ipv4/ip_forward",
		"/proc/sys/net/ipv4/ping_group_range",
		"/proc/sys/net/ipv4/ip_unprivileged_port_start",
		"/proc/sys/net/ipv4/conf/lo/forwarding",
		"/proc/sys/net/core/somaxconn",
	} {
		try("write "+p, func() error {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("(read) %w", err)
			}
			return os.WriteFile(p, b, 0)
		}())
	}

	// A network namespace, or a user namespace to make one in.
	try("unshare CLONE_NEWNET", unix.Unshare(unix.CLONE_NEWNET))
	try("unshare CLONE_NEWUSER", unix.Unshare(unix.CLONE_NEWUSER))
	try("setns to the own namespace", func() error {
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("(open) %w", err)
		}
		defer unix.Close(fd)
		return unix.Setns(fd, unix.CLONE_NEWNET)
	}())
	fmt.Println("done")
	return 0
}

func errText47n(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func htons47n(v uint16) uint16 { return v<<8 | v>>8 }

// ifIoctl47n issues req on lo with the request set by set.
func ifIoctl47n(req uint, set func(*unix.Ifreq)) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("(socket) %w", err)
	}
	defer unix.Close(s)
	r, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	set(r)
	return unix.IoctlIfreq(s, req, r)
}

// rtattr47n is one netlink attribute, padded.
func rtattr47n(typ uint16, data []byte) []byte {
	b := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// nlRequest47n sends one request with an ACK asked for on a netlink socket of proto and
// returns the kernel's answer: nil for an ACK (or the end of a dump), the errno otherwise.
func nlRequest47n(proto int, typ, flags uint16, body []byte) error {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return fmt.Errorf("(socket) %w", err)
	}
	defer unix.Close(s)
	if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
		return fmt.Errorf("(timeout) %w", err)
	}
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 47)
	if err := unix.Sendto(s, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("(send) %w", err)
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(s, buf, 0)
		if err != nil {
			return fmt.Errorf("(receive) %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("(parse) %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					return syscall.Errno(-code)
				}
				return nil
			case unix.NLMSG_DONE:
				return nil
			}
		}
	}
}

// spec47n is a run-as spec running the probe's subcommand args.
func spec47n(t testing.TB, id string, args ...string) compute.Spec {
	return compute.Spec{ID: id, Argv: append([]string{"/probe"}, args...), Env: []string{probeEnv + "=" + probe47n},
		Binds: []compute.Bind{probeBind(t)}, RunAs: testRunAs}
}

// held47n is a sandbox that runs until release is closed, its network namespace kept by ns
// (a descriptor of the test's).
type held47n struct {
	h           *handle
	release     *os.File
	ns          *os.File
	ino         uint64
	out, errOut *syncBuffer
	endOnce     sync.Once
	exit        compute.Exit
	waitErr     error
}

// start47n starts s with a pipe's read end as fd 3 (the probe waits for its EOF) and keeps
// the sandbox's network namespace. It uses no testing.T: it runs on goroutines.
func start47n(p *Provider, s compute.Spec) (*held47n, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	x := &held47n{release: w, out: new(syncBuffer), errOut: new(syncBuffer)}
	s.Files = append(append([]*os.File{}, s.Files...), r)
	s.Stdout, s.Stderr = x.out, x.errOut
	if s.Env == nil {
		s.Env = []string{"PATH=/usr/bin:/bin"}
	}
	h, err := p.Start(context.Background(), s)
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	x.h = h.(*handle)
	// bwrap has set up every namespace before the command is released: the sandbox process
	// is in its final network namespace now. A `sandbox: none` task is its own process.
	pid := x.h.sandboxPID
	if pid == 0 {
		pid = x.h.pid
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		x.end()
		return nil, fmt.Errorf("open the sandbox's network namespace: %w (stderr %q)", err, x.errOut.String())
	}
	x.ns = ns
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		x.end()
		return nil, err
	}
	x.ino = st.Ino
	return x, nil
}

// hold47n is start47n for the test's goroutine: the sandbox ends, and its namespace is let
// go, when the test does.
func hold47n(t *testing.T, p *Provider, s compute.Spec) *held47n {
	t.Helper()
	x, err := start47n(p, s)
	if err != nil {
		t.Fatalf("start %s: %v", s.ID, err)
	}
	t.Cleanup(func() { x.end(); x.ns.Close() })
	return x
}

// end lets the sandbox's command exit and waits for it.
func (x *held47n) end() (compute.Exit, error) {
	x.endOnce.Do(func() {
		x.release.Close()
		x.exit, x.waitErr = x.h.Wait()
	})
	return x.exit, x.waitErr
}

// awaitLine waits for the sandbox to print a line starting with prefix and returns it.
func (x *held47n) awaitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, l := range strings.Split(x.out.String(), "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		select {
		case <-x.h.done:
			t.Fatalf("the sandbox ended before printing %q: stdout %q stderr %q", prefix, x.out.String(), x.errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q from the sandbox after 30 s: stdout %q stderr %q", prefix, x.out.String(), x.errOut.String())
		}
		runtime.Gosched()
	}
}

// spares47n is the inodes of p's spares, each kept alive by a duplicate descriptor the test
// closes at its end, and the inode of the one take hands out next (0 for none).
// spareInos47n is the inode of each of p's spares, read without a descriptor of the test's.
func spareInos47n(p *netnsPool) map[uint64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[uint64]bool{}
	for _, f := range p.spare {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			m[st.Ino] = true
		}
	}
	return m
}

func spares47n(t *testing.T, p *netnsPool) (map[uint64]bool, uint64) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[uint64]bool{}
	var top uint64
	for _, f := range p.spare {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			t.Fatal(err)
		}
		d := os.NewFile(uintptr(fd), "spare")
		t.Cleanup(func() { d.Close() })
		top = nsInode(t, d)
		m[top] = true
	}
	return m, top
}

// topSpare is the descriptor take hands out next.
func topSpare(t *testing.T, p *netnsPool) *os.File {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.spare) == 0 {
		t.Fatal("the pool holds no spare")
	}
	return p.spare[len(p.spare)-1]
}

// fullPool fills p's pool and waits for it; the test lets the spares go at its end.
func fullPool(t *testing.T, p *Provider) {
	t.Helper()
	p.netns.fill()
	if n := filled(&p.netns); n != netnsSpares {
		t.Fatalf("the pool holds %d spares after a fill, want %d", n, netnsSpares)
	}
	settle47n(t)
}

// newProvider47n is a provider whose starts' threads, and its pool's, are gone by the test's
// end, and whose spares are then closed.
func newProvider47n(t *testing.T) *Provider {
	t.Helper()
	p := newProvider(t, Options{})
	t.Cleanup(func() {
		settle47n(t, &p.netns)
		drain47n(&p.netns)
	})
	return p
}

// settle47n waits until no run-as start's thread and no fill's thread is left: each ends
// once its work is done, and a thread's end kills the processes it forked
// (TestRedTeam47nNetNS_FillKillsNoTaskOfTheProvider), such as an invoker's sandbox
// started meanwhile.
func settle47n(t *testing.T, pools ...*netnsPool) {
	t.Helper()
	awaitThreadsHome(t, "mnt", nil)
	for _, p := range pools {
		filled(p)
	}
	awaitThreadsHome(t, "net", nil)
}

// drain47n closes every spare once no fill is under way.
func drain47n(p *netnsPool) {
	filled(p)
	p.mu.Lock()
	n := len(p.spare)
	p.mu.Unlock()
	for range n {
		if f := p.take(); f != nil {
			f.Close()
		}
	}
}

// netFDs47n counts this process's descriptors of the network namespaces inos names. Only
// those: other tests' providers keep spares of their own, which the collector closes when
// it finalizes them, at any moment.
func netFDs47n(inos map[uint64]bool) int {
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(l, "net:[") {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "net:["), "]"), 10, 64); err == nil && inos[ino] {
			n++
		}
	}
	return n
}

// threadsAway47n lists this process's threads whose kind namespace ("net", "mnt") is not
// the main thread's, as "TID INODE".
func threadsAway47n(kind string) map[string]uint64 {
	var home unix.Stat_t
	if err := unix.Stat("/proc/self/ns/"+kind, &home); err != nil {
		return map[string]uint64{"error": 0}
	}
	away := map[string]uint64{}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/task/"+e.Name()+"/ns/"+kind, &st); err == nil && st.Ino != home.Ino {
			away[e.Name()] = st.Ino
		}
	}
	return away
}

// awaitThreadsHome waits until every thread of this process is in the main thread's kind
// namespace, allowing those in a namespace of allow: the start threads of sandboxes still
// running, one each. A run-as start's thread leaves its private mount namespace only by
// ending, after the pool's fill: with kind "mnt" this waits for every start's end.
func awaitThreadsHome(t *testing.T, kind string, allow map[uint64]bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		away := threadsAway47n(kind)
		per := map[uint64]int{}
		bad := false
		for _, ino := range away {
			per[ino]++
			if !allow[ino] || per[ino] > 1 {
				bad = true
			}
		}
		if !bad {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of the provider's process in a %s namespace other than the host's after 20 s (tid: inode): %v; allowed (running sandboxes): %v", kind, away, allow)
		}
		runtime.Gosched()
	}
}

func lines47n(out string, prefix string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			ls = append(ls, l)
		}
	}
	return ls
}

// nsOf47n parses "ns net:[N] <nil>" into N.
func nsOf47n(t *testing.T, out string) uint64 {
	t.Helper()
	ls := lines47n(out, "ns ")
	if len(ls) != 1 {
		t.Fatalf("no namespace line in %q", out)
	}
	f := strings.Fields(ls[0])
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(f[1], "net:["), "]"), 10, 64)
	if err != nil {
		t.Fatalf("namespace line %q: %v", ls[0], err)
	}
	return n
}

func requireNetNSPool(t *testing.T) {
	t.Helper()
	requireBwrap(t)
	requireRoot(t)
	requireUserNS(t)
}

// TestRedTeam47nNetNS_PoolBoundedUnderContention: fill and take hammered from many
// goroutines never hand one namespace out twice, never hold more than netnsSpares made or
// under way, lose no descriptor, and a burst of fills makes no more than the pool lacks.
func TestRedTeam47nNetNS_PoolBoundedUnderContention(t *testing.T) {
	requireRoot(t)
	var p netnsPool
	for range 20 {
		p.fill()
	}
	if n := filled(&p); n != netnsSpares || p.made != netnsSpares {
		t.Fatalf("twenty fills of an empty pool: %d spares, %d made, want %d", n, p.made, netnsSpares)
	}
	var (
		mu     sync.Mutex
		taken  = map[uint64]*os.File{}
		dups   []string
		broken []string
		takes  atomic.Int64
	)
	check := func() {
		p.mu.Lock()
		n, making := len(p.spare), p.making
		p.mu.Unlock()
		if n > netnsSpares || making < 0 || n+making > netnsSpares {
			mu.Lock()
			broken = append(broken, fmt.Sprintf("%d spares, %d under way", n, making))
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 30 {
				p.fill()
				check()
				f := p.take()
				check()
				if f == nil {
					continue
				}
				takes.Add(1)
				var st unix.Stat_t
				if err := unix.Fstat(int(f.Fd()), &st); err != nil {
					mu.Lock()
					broken = append(broken, "fstat: "+err.Error())
					mu.Unlock()
					continue
				}
				mu.Lock()
				if taken[st.Ino] != nil {
					dups = append(dups, fmt.Sprint(st.Ino))
				}
				taken[st.Ino] = f
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n := filled(&p)
	if len(dups) > 0 {
		t.Errorf("namespaces handed out twice: %v", dups)
	}
	if len(broken) > 0 {
		t.Errorf("the pool went past its bound: %v", broken[:min(len(broken), 5)])
	}
	if n > netnsSpares || p.made != int(takes.Load())+n {
		t.Errorf("%d made, %d taken, %d spare: a namespace was lost or made twice", p.made, takes.Load(), n)
	}
	inos := map[uint64]bool{}
	for ino, f := range taken {
		inos[ino] = true
		f.Close()
	}
	p.mu.Lock()
	for _, f := range p.spare {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			inos[st.Ino] = true
		}
	}
	p.mu.Unlock()
	drain47n(&p)
	if got := netFDs47n(inos); got != 0 {
		t.Errorf("%d descriptors of the pool's namespaces open after every one was closed", got)
	}
}

// TestRedTeam47nNetNS_ConcurrentStartsNeverShare: starts racing on a full pool each run in a
// namespace of their own: exactly netnsSpares of them in the ones made ahead, the rest in
// bwrap's, none in the host's. Their ends refill the pool once, and every descriptor of a
// taken namespace is closed.
func TestRedTeam47nNetNS_ConcurrentStartsNeverShare(t *testing.T) {
	requireNetNSPool(t)
	p := newProvider47n(t)
	fullPool(t, p)
	ahead := spareInos47n(&p.netns)
	made := p.netns.made
	host := hostNetNS(t)
	const k = 6
	xs := make([]*held47n, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { xs[i], errs[i] = start47n(p, spec47n(t, fmt.Sprint("race", i), "hold")) })
	}
	wg.Wait()
	for i, x := range xs {
		if x != nil {
			t.Cleanup(func() { x.end(); x.ns.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
	}
	seen := map[uint64]int{}
	pooled := 0
	running := map[uint64]bool{}
	for i, x := range xs {
		if x.ino == host {
			t.Errorf("start %d runs in the host's network namespace", i)
		}
		if j, ok := seen[x.ino]; ok {
			t.Errorf("starts %d and %d share network namespace %d", j, i, x.ino)
		}
		seen[x.ino] = i
		running[x.ino] = true
		if ahead[x.ino] {
			pooled++
		}
	}
	if pooled != netnsSpares {
		t.Errorf("%d of %d starts ran in the %d namespaces made ahead %v", pooled, k, netnsSpares, ahead)
	}
	// While they run, the only threads outside the host's namespace are the pooled starts'
	// own, one each.
	awaitThreadsHome(t, "net", running)
	for i, x := range xs {
		if exit, err := x.end(); err != nil || exit.Code != 0 {
			t.Errorf("start %d: exit %+v, %v: %s", i, exit, err, x.errOut.String())
		}
	}
	awaitThreadsHome(t, "mnt", nil)
	awaitThreadsHome(t, "net", nil)
	if n := filled(&p.netns); n != netnsSpares || p.netns.made-made != netnsSpares {
		t.Errorf("after %d ends: %d spares, %d made, want %d and %d", k, n, p.netns.made-made, netnsSpares, netnsSpares)
	}
	for _, x := range xs {
		x.ns.Close()
	}
	// Every descriptor of a namespace a start ran in is closed: the spares taken and
	// bwrap's own (each kept now only by the test's x.ns, closed above). The refill's new
	// spares may have the inode numbers of those freed namespaces: they are left out.
	gone := maps.Clone(running)
	for ino := range spareInos47n(&p.netns) {
		delete(gone, ino)
	}
	if got := netFDs47n(gone); got != 0 {
		t.Errorf("%d descriptors of the starts' network namespaces still open", got)
	}
}

// TestRedTeam47nNetNS_SequentialStartsNeverReuse: one start after another, each runs in the
// spare take hands out, which no start ran in before; the pool is never refilled with a
// namespace a start used; the descriptor a start takes is closed; a start that fails after
// its take consumes its namespace, which no later start gets.
func TestRedTeam47nNetNS_SequentialStartsNeverReuse(t *testing.T) {
	requireNetNSPool(t)
	p := newProvider47n(t)
	host := hostNetNS(t)
	used := map[uint64]string{}
	first := hold47n(t, p, spec47n(t, "first", "hold"))
	if first.ino == host {
		t.Fatal("the first start runs in the host's network namespace")
	}
	first.end()
	used[first.ino] = "first start (bwrap's own)"
	offered := map[uint64]bool{}
	step := func(name string) (map[uint64]bool, uint64, *os.File) {
		t.Helper()
		awaitThreadsHome(t, "mnt", nil)
		awaitSpares(t, &p.netns, netnsSpares)
		ahead, top := spares47n(t, &p.netns)
		for ino := range ahead {
			if who, ok := used[ino]; ok {
				t.Errorf("%s: the pool offers namespace %d, which %s ran in", name, ino, who)
			}
			offered[ino] = true
		}
		return ahead, top, topSpare(t, &p.netns)
	}
	for i := range 4 {
		name := fmt.Sprint("start ", i)
		ahead, top, topF := step(name)
		x := hold47n(t, p, spec47n(t, fmt.Sprint("seq", i), "hold"))
		if x.ino != top || !ahead[x.ino] {
			t.Errorf("%s runs in %d, not the spare take hands out (%d of %v)", name, x.ino, top, ahead)
		}
		if who, ok := used[x.ino]; ok || x.ino == host {
			t.Errorf("%s runs in %d: %s ran there (host's is %d)", name, x.ino, who, host)
		}
		if _, err := topF.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: the descriptor it took is still open (%v)", name, err)
		}
		used[x.ino] = name
		if exit, err := x.end(); err != nil || exit.Code != 0 {
			t.Fatalf("%s: exit %+v, %v: %s", name, exit, err, x.errOut.String())
		}
	}
	// A start that fails after its take (a bind source that does not exist).
	_, consumed, topF := step("failed start")
	s := spec47n(t, "fails", "hold")
	s.Binds = append(s.Binds, compute.Bind{Src: "/nonexistent-47n", Dst: "/x"})
	if h, err := p.Start(t.Context(), s); err == nil {
		h.Wait()
		t.Fatal("a start with a missing bind source started")
	}
	if _, err := topF.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the failed start left the descriptor it took open (%v)", err)
	}
	used[consumed] = "the failed start (taken, never run in)"
	for i := range 3 {
		name := fmt.Sprint("start after the failure ", i)
		ahead, _, _ := step(name)
		if ahead[consumed] {
			t.Errorf("%s: the namespace the failed start took is offered again", name)
		}
		x := hold47n(t, p, spec47n(t, fmt.Sprint("after", i), "hold"))
		if who, ok := used[x.ino]; ok || !ahead[x.ino] {
			t.Errorf("%s runs in %d (%s; offered %v)", name, x.ino, who, ahead)
		}
		used[x.ino] = name
		x.end()
	}
	awaitThreadsHome(t, "mnt", nil)
	awaitThreadsHome(t, "net", nil)
}

// TestRedTeam47nNetNS_NoNamespaceDescriptorReachesTheSandbox: while a start runs in a
// namespace made ahead, with another spare in the provider, neither the sandbox's command
// nor bwrap holds a descriptor of any namespace.
func TestRedTeam47nNetNS_NoNamespaceDescriptorReachesTheSandbox(t *testing.T) {
	requireNetNSPool(t)
	p := newProvider47n(t)
	fullPool(t, p)
	ahead, _ := spares47n(t, &p.netns)
	x := hold47n(t, p, spec47n(t, "fds", "hold"))
	x.awaitLine(t, "held")
	if !ahead[x.ino] {
		t.Fatalf("the start runs in %d, not one made ahead %v", x.ino, ahead)
	}
	p.netns.mu.Lock()
	left := len(p.netns.spare)
	p.netns.mu.Unlock()
	if left == 0 {
		t.Fatal("no spare left in the provider while the sandbox runs")
	}
	isNS := func(l string) bool {
		kind, _, ok := strings.Cut(l, ":[")
		return ok && slices.Contains([]string{"net", "mnt", "pid", "user", "uts", "ipc", "cgroup", "time"}, kind)
	}
	fds := lines47n(x.out.String(), "fd ")
	if len(fds) < 4 {
		t.Fatalf("the sandbox listed %d descriptors: %q", len(fds), x.out.String())
	}
	for _, l := range fds {
		if f := strings.Fields(l); len(f) == 3 && isNS(f[2]) {
			t.Errorf("the sandbox's command holds a namespace: %s", l)
		}
	}
	dir := "/proc/" + strconv.Itoa(x.h.pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && isNS(l) {
			t.Errorf("bwrap holds a namespace: fd %s -> %s", e.Name(), l)
		}
	}
}

// TestRedTeam47nNetNS_AbstractSocketsAndPortsStayApart: abstract unix sockets and loopback
// ports are per network namespace. A sandbox in a namespace made ahead neither lists nor
// reaches the host's, nor another such sandbox's, and the host does not reach theirs; a
// host-network sandbox reaches the host's (the probe's control).
func TestRedTeam47nNetNS_AbstractSocketsAndPortsStayApart(t *testing.T) {
	requireNetNSPool(t)
	p := newProvider47n(t)
	fullPool(t, p)
	ahead, _ := spares47n(t, &p.netns)
	tag := strconv.Itoa(os.Getpid())
	hostName, aName := "agora47n-host-"+tag, "agora47n-a-"+tag
	ul, err := net.Listen("unix", "@"+hostName)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	hostTCP := tl.Addr().String()

	a := hold47n(t, p, spec47n(t, "a", "listen", aName))
	aPort := strings.Fields(a.awaitLine(t, "listening"))[1]
	aTCP := "127.0.0.1:" + aPort
	b := run(t, p, spec47n(t, "b", "reach", "unix:"+hostName, "unix:"+aName, "tcp:"+hostTCP, "tcp:"+aTCP, "unix:"+hostName))
	ctl := spec47n(t, "control", "reach", "unix:"+hostName, "tcp:"+hostTCP)
	ctl.Network = true
	c := run(t, p, ctl)
	if !ahead[a.ino] {
		t.Errorf("sandbox a runs in %d, not one made ahead %v", a.ino, ahead)
	}
	for _, l := range lines47n(b.stdout, "listed ") {
		if strings.HasSuffix(l, " yes") {
			t.Errorf("sandbox b lists another namespace's abstract socket: %s", l)
		}
	}
	reach := lines47n(b.stdout, "reach ")
	if len(reach) != 5 {
		t.Fatalf("sandbox b: %q %q", b.stdout, b.stderr)
	}
	for _, l := range reach {
		if strings.HasSuffix(l, " ok") {
			t.Errorf("sandbox b reaches another namespace: %s", l)
		}
	}
	if !strings.Contains(c.stdout, "listed "+hostName+" yes") || strings.Count(c.stdout, " ok\n") != 2 {
		t.Errorf("the host-network control does not reach the host's sockets: %q %q", c.stdout, c.stderr)
	}
	if c, err := net.DialTimeout("unix", "@"+aName, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("the host reaches sandbox a's abstract socket @%s", aName)
	}
	// a counts what it accepts: a connection from the host or b on its port shows there.
	if c, err := net.DialTimeout("tcp", aTCP, 2*time.Second); err == nil {
		c.Close()
	}
	if _, err := a.end(); err != nil {
		t.Fatal(err)
	}
	if got := lines47n(a.out.String(), "accepted "); len(got) != 1 || got[0] != "accepted 2" {
		t.Errorf("sandbox a accepted other than its own two connections: %v (%q)", got, a.out.String())
	}
}

// TestRedTeam47nNetNS_AgentCannotConfigureTheNamespace: in a namespace made ahead, in the one
// bwrap makes for a run-as start that finds the pool empty, and in an invoker's sandbox,
// nothing that configures the network works.
func TestRedTeam47nNetNS_AgentCannotConfigureTheNamespace(t *testing.T) {
	requireNetNSPool(t)
	host := hostNetNS(t)
	// hostRoot: the sandbox's uid is host root behind a user namespace (a root provider's
	// sandbox without RunAs), which the kernel's sysctl check lets write the root-owned net
	// sysctls of the sandbox's own namespace: logged, as TestRedTeam47r_SysctlWrites logs
	// the host-wide ones.
	check := func(t *testing.T, r result, hostRoot bool) uint64 {
		t.Helper()
		if r.exit.Code != 0 || !strings.Contains(r.stdout, "\ndone\n") {
			t.Fatalf("probe exit %d: %s %s", r.exit.Code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "control lo-up true\n") || !strings.Contains(r.stdout, "control getlink ok\n") {
			t.Errorf("the probe's controls failed: %s", r.stdout)
		}
		if n := len(lines47n(r.stdout, "denied ")); n < 20 {
			t.Errorf("only %d attempts denied: %s", n, r.stdout)
		}
		for _, l := range lines47n(r.stdout, "ESCAPED") {
			if hostRoot && strings.HasPrefix(l, "ESCAPED write /proc/sys/net/") {
				t.Logf("host root inside, not a RunAs sandbox (not failed): %s", l)
				continue
			}
			t.Errorf("the agent configures its network: %s", l)
		}
		ns := nsOf47n(t, r.stdout)
		if ns == host {
			t.Errorf("the probe ran in the host's network namespace")
		}
		return ns
	}
	t.Run("made ahead", func(t *testing.T) {
		p := newProvider47n(t)
		fullPool(t, p)
		ahead, _ := spares47n(t, &p.netns)
		if ns := check(t, run(t, p, spec47n(t, "attack", "attack")), false); !ahead[ns] {
			t.Errorf("ran in %d, not one made ahead %v", ns, ahead)
		}
	})
	t.Run("bwrap's own, pool empty", func(t *testing.T) {
		p := newProvider47n(t)
		check(t, run(t, p, spec47n(t, "attack", "attack")), false)
	})
	t.Run("invoker", func(t *testing.T) {
		p := newProvider47n(t)
		s := spec47n(t, "attack", "attack")
		s.RunAs = nil
		check(t, run(t, p, s), os.Geteuid() == 0)
	})
}

// TestRedTeam47nNetNS_NoThreadLeftInAForeignNamespace: after starts of every kind (made
// ahead, bwrap's own, concurrent, failed after the take, host network), every thread of the
// provider's process is back in the host's network and mount namespaces: the threads that
// made or joined a namespace ended with it.
func TestRedTeam47nNetNS_NoThreadLeftInAForeignNamespace(t *testing.T) {
	requireNetNSPool(t)
	p := newProvider47n(t)
	for i := range 4 {
		run(t, p, spec47n(t, fmt.Sprint("seq", i), "ns"))
		awaitThreadsHome(t, "mnt", nil)
		awaitSpares(t, &p.netns, netnsSpares)
	}
	fail := spec47n(t, "fails", "ns")
	fail.Binds = append(fail.Binds, compute.Bind{Src: "/nonexistent-47n", Dst: "/x"})
	if h, err := p.Start(t.Context(), fail); err == nil {
		h.Wait()
		t.Fatal("a start with a missing bind source started")
	}
	hostNet := spec47n(t, "host", "ns")
	hostNet.Network = true
	run(t, p, hostNet)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			x, err := start47n(p, spec47n(t, fmt.Sprint("burst", i), "hold"))
			if err == nil {
				x.ns.Close()
				_, err = x.end()
			}
			errs[i] = err
		})
	}
	for range 10 {
		p.netns.fill()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	awaitThreadsHome(t, "mnt", nil)
	filled(&p.netns)
	awaitThreadsHome(t, "net", nil)
}

// TestRedTeam47nNetNS_FailedJoinFallsBackToBwrapsNamespace: a spare that setns refuses
// (not a network namespace) is consumed and closed, and the start runs in a namespace bwrap
// makes, never in the host's: --share-net follows only a join that worked.
func TestRedTeam47nNetNS_FailedJoinFallsBackToBwrapsNamespace(t *testing.T) {
	requireNetNSPool(t)
	host := hostNetNS(t)
	for _, bogus := range []string{"/proc/self/ns/uts", "/dev/null"} {
		t.Run(filepath.Base(bogus), func(t *testing.T) {
			p := newProvider47n(t)
			f, err := os.Open(bogus)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p.netns.mu.Lock()
			p.netns.spare = append(p.netns.spare, f)
			p.netns.mu.Unlock()
			x := hold47n(t, p, spec47n(t, "bogus", "hold"))
			x.awaitLine(t, "held")
			if x.ino == host {
				t.Errorf("after a failed join the sandbox runs in the host's network namespace %d", host)
			}
			if got := lines47n(x.out.String(), "if "); !slices.Equal(got, []string{"if lo"}) {
				t.Errorf("after a failed join the sandbox sees interfaces %q", got)
			}
			if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("the spare that failed to join is still open (%v)", err)
			}
			p.netns.mu.Lock()
			left := slices.Contains(p.netns.spare, f)
			p.netns.mu.Unlock()
			if left {
				t.Error("the spare that failed to join is still in the pool")
			}
		})
	}
}

// TestRedTeam47nNetNS_PathsThatTakeNoSpare: a host-network start runs in the host's
// namespace, takes no spare and makes none; an invoker's sandbox and a run-as warm slot run
// in a namespace bwrap makes and leave the pool as it was.
func TestRedTeam47nNetNS_PathsThatTakeNoSpare(t *testing.T) {
	requireNetNSPool(t)
	host := hostNetNS(t)
	unchanged := func(t *testing.T, p *Provider, ahead map[uint64]bool, made int) {
		t.Helper()
		awaitThreadsHome(t, "mnt", nil)
		now, _ := spares47n(t, &p.netns)
		if filled(&p.netns); !maps47nEqual(now, ahead) || p.netns.made != made {
			t.Errorf("the pool changed: spares %v, were %v; %d made, were %d", now, ahead, p.netns.made, made)
		}
	}
	t.Run("host network, pool empty", func(t *testing.T) {
		p := newProvider47n(t)
		s := spec47n(t, "host", "ns")
		s.Network = true
		if ns := nsOf47n(t, run(t, p, s).stdout); ns != host {
			t.Errorf("Network: true ran in %d, the host's is %d", ns, host)
		}
		unchanged(t, p, map[uint64]bool{}, 0)
	})
	t.Run("host network, pool full", func(t *testing.T) {
		p := newProvider47n(t)
		fullPool(t, p)
		ahead, _ := spares47n(t, &p.netns)
		s := spec47n(t, "host", "ns")
		s.Network = true
		if ns := nsOf47n(t, run(t, p, s).stdout); ns != host {
			t.Errorf("Network: true ran in %d, the host's is %d", ns, host)
		}
		unchanged(t, p, ahead, netnsSpares)
	})
	t.Run("invoker", func(t *testing.T) {
		p := newProvider47n(t)
		fullPool(t, p)
		ahead, _ := spares47n(t, &p.netns)
		s := spec47n(t, "invoker", "ns")
		s.RunAs = nil
		if ns := nsOf47n(t, run(t, p, s).stdout); ns == host || ahead[ns] {
			t.Errorf("the invoker's sandbox ran in %d (host's %d, made ahead %v)", ns, host, ahead)
		}
		unchanged(t, p, ahead, netnsSpares)
	})
	t.Run("warm slot", func(t *testing.T) {
		requireSlots(t)
		p := newProvider47n(t)
		fullPool(t, p)
		ahead, _ := spares47n(t, &p.netns)
		tmpl := compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", "readlink /proc/self/ns/net"}, Env: []string{"PATH=/usr/bin:/bin"},
			Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}, RunAs: testRunAs}
		slot := newSlot(t, p, tmpl, slotOpts(t))
		held, err := os.Open("/proc/" + strconv.Itoa(slot.h.sandboxPID) + "/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		ino := nsInode(t, held)
		if ino == host || ahead[ino] {
			t.Errorf("the warm slot's sandbox is in %d (host's %d, made ahead %v)", ino, host, ahead)
		}
		spec := tmpl
		spec.ID, spec.Binds = "d1", []compute.Bind{{Src: t.TempDir(), Dst: "/agora/out", Writable: true}}
		r := runInSlot(t, p, slot, spec)
		if want := fmt.Sprintf("net:[%d]\n", ino); r.exit.Code != 0 || r.stdout != want {
			t.Errorf("the claim ran with exit %d, printed %q, want %q (%s)", r.exit.Code, r.stdout, want, r.stderr)
		}
		unchanged(t, p, ahead, netnsSpares)
	})
}

func maps47nEqual(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestRedTeam47nNetNS_FillKillsNoTaskOfTheProvider: every task the provider starts carries a
// parent-death signal (Pdeathsig, SIGKILL), which Linux sends when the thread that forked
// it ends. fill makes each namespace on a thread it locks; if the runtime then ends that
// thread, whatever the thread forked before dies with it: an invoker's sandbox or a
// `sandbox: none` task, which an ordinary goroutine starts from whichever thread it runs on
// (a root provider runs `sandbox: none` dispatches beside run-as ones). Here the task is
// started from a thread the test's goroutine then hands back, and the fill's goroutine, queued
// next, runs on that thread.
func TestRedTeam47nNetNS_FillKillsNoTaskOfTheProvider(t *testing.T) {
	requireRoot(t)
	for _, kind := range []string{"invoker", compute.SandboxNone} {
		t.Run(kind, func(t *testing.T) {
			p := newProvider47n(t)
			s := spec47n(t, "task", "hold")
			s.RunAs = nil
			if kind == compute.SandboxNone {
				if p.prlimit == "" {
					t.Skip("SKIP: prlimit not installed: apt-get install util-linux")
				}
				exe, err := os.Executable()
				if err != nil {
					t.Fatal(err)
				}
				s.Sandbox, s.Binds, s.Argv = compute.SandboxNone, nil, []string{exe, "hold"}
			} else {
				requireBwrap(t)
			}
			killed := 0
			for i := range 8 {
				runtime.LockOSThread()
				x, err := start47n(p, s)
				runtime.UnlockOSThread()
				if err != nil {
					t.Fatal(err)
				}
				p.netns.fill()
				filled(&p.netns)
				drain47n(&p.netns)
				exit, err := x.end()
				x.ns.Close()
				if err != nil || exit.Code != 0 || exit.Signal != "" {
					killed++
					t.Logf("round %d: the task ended %+v (%v) before its release", i, exit, err)
				}
			}
			if killed > 0 {
				t.Errorf("%d of 8 tasks started from a thread a fill then ran on were killed", killed)
			}
		})
	}
}
