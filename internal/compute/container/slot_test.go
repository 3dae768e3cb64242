package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// gatewayHost is the name the test gateway's certificate is for; the slot containers reach
// it only through its Unix socket.
const gatewayHost = "gateway.agora.test"

// slotGW is a network gateway served on a Unix socket, with its sessions and slots.
type slotGW struct {
	srv    *netgw.Server
	dir    string
	reg    *netgw.Registry
	slots  *netgw.Slots
	certs  *netgw.Certs
	sock   string
	url    string
	logs   syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startSlotGateway serves a gateway below dir (a fresh temp dir when "") on dir/gw.sock, which
// any uid may connect to (the slot containers run as uids of their own).
func startSlotGateway(t testing.TB, dir string) *slotGW {
	t.Helper()
	if dir == "" {
		dir = shortTempDir(t)
	}
	g := &slotGW{dir: dir, url: "https://" + gatewayHost + ":8443", sock: filepath.Join(dir, "gw.sock"), done: make(chan error, 1)}
	g.reg = &netgw.Registry{Dir: filepath.Join(dir, "sessions")}
	g.slots = &netgw.Slots{Dir: filepath.Join(dir, "slots")}
	var err error
	if g.certs, err = netgw.LoadOrCreateCA(filepath.Join(dir, "keys"), []string{gatewayHost}); err != nil {
		t.Fatal(err)
	}
	os.Remove(g.sock)
	ln, err := net.Listen("unix", g.sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(g.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	srv := &netgw.Server{Registry: g.reg, Slots: g.slots, Version: workerremote.Version(), ClaimWait: 2 * time.Second}
	srv.Log = slog.New(slog.NewTextHandler(&g.logs, nil))
	g.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- srv.Serve(ctx, ln, g.certs.Server) }()
	t.Cleanup(func() { cancel(); <-g.done })
	return g
}

// shortTempDir is a temp dir whose socket paths fit a socket address.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agslot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// slotSpec is a slot container's spec running the test binary's probe mode.
func slotSpec(t testing.TB, probe string) compute.Spec {
	s := shSpec(t, "")
	s.Argv = []string{DefaultShimPath, probe}
	return s
}

func (g *slotGW) options(sl *netgw.Slot, out, errb io.Writer) SlotOptions {
	return SlotOptions{
		ID: sl.ID, Token: sl.Token, Home: g.dir, Holder: "test", GatewayURL: g.url, GatewayCA: g.certs.CAPEM,
		GatewaySocket: g.sock, Shape: "probe", Stdout: out, Stderr: errb,
	}
}

// A warm slot container, end to end on the real engine: it holds only the slot's token (in no
// argv, environment, label or name the engine shows), reaches nothing but the gateway's
// socket, cannot use its token on a dispatch's routes, claims the dispatch bound to its slot
// over the socket and opens that dispatch's session with the granted token; the slot token
// replayed after the claim is refused. The container is removed once it ends.
func TestSlot_ClaimOverGatewaySocket(t *testing.T) {
	slotClaimOverGatewaySocket(t, newTestProvider(t, Options{}), engine(t))
}

// The same warm slot under gVisor (runtime: runsc, the engine whose default runtime is runsc):
// its worker reaches the gateway's socket through gVisor's file proxy and nothing else.
func TestSlot_ClaimOverGatewaySocketRunsc(t *testing.T) {
	host := runscHost(t)
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	slotClaimOverGatewaySocket(t, newTestProvider(t, Options{Runtime: RuntimeRunsc, Host: host}), cli)
}

func slotClaimOverGatewaySocket(t *testing.T, p *Provider, cli *client.Client) {
	// The probe reads its process status from the kernel it runs on: gVisor's Sentry shows no
	// seccomp filter on the agent (runsc does not load the container's profile; the Sentry is
	// the boundary, and the isolation says runsc, not seccomp).
	seccomp := "2"
	if p.runtime == RuntimeRunsc {
		seccomp = "0"
	}
	g := startSlotGateway(t, "")
	sess, err := g.reg.Export(context.Background(), compute.Spec{ID: "01SLOTDISPATCH"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sl, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	// Listeners of the host's that a slot must not reach: on every address (so its loopback
	// and its own address) and an abstract Unix socket.
	tl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	port := itoa(tl.Addr().(*net.TCPAddr).Port)
	abstract := "@agora-slot-test-" + itoa(os.Getpid())
	ul, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	dials := []string{"tcp:127.0.0.1:" + port, "unix:" + abstract}
	if ip := hostIP(); ip != "" {
		dials = append(dials, "tcp:"+net.JoinHostPort(ip, port))
	}
	spec := slotSpec(t, "probe-claim")
	spec.Env = append(spec.Env, "PROBE_DIAL="+strings.Join(dials, " "))
	var out, errb syncBuffer
	slot, err := p.StartSlot(t.Context(), spec, g.options(sl, &out, &errb))
	if err != nil {
		t.Fatalf("StartSlot: %v", err)
	}
	defer slot.Discard()

	ins, err := cli.ContainerInspect(t.Context(), slot.h.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := ins.Container
	shown := strings.Join(append(append(append([]string{c.Name, c.Path}, c.Args...), c.Config.Env...), c.Config.Cmd...), "\n")
	for k, v := range c.Config.Labels {
		shown += "\n" + k + "=" + v
	}
	if strings.Contains(shown, sl.Token) {
		t.Fatal("the slot token is in what the engine shows of the container (name, argv, env or labels)")
	}
	if c.Config.Labels[LabelSlot] != sl.ID || c.Config.Labels[LabelHome] != HomeLabel(g.dir) || c.Config.Labels[LabelDispatch] != "" {
		t.Errorf("labels %v", c.Config.Labels)
	}
	h := c.HostConfig
	// (podman shows CapDrop ALL as the list it drops: the probe reads CapEff instead.)
	if h.NetworkMode != "none" || !h.ReadonlyRootfs || c.Config.User == "" || strings.HasPrefix(c.Config.User, "0") {
		t.Errorf("slot container is not hardened as a cold one: network %q readonly %v user %q", h.NetworkMode, h.ReadonlyRootfs, c.Config.User)
	}

	bound := make(chan error, 1)
	go func() { bound <- sl.Bind(t.Context(), sess.Dispatch, sess.Token) }()
	exit, err := slot.Handle().Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bound; err != nil {
		t.Fatalf("Bind: %v", err)
	}
	got := out.String()
	t.Logf("probe:\n%s\nstderr:\n%s", got, errb.String())
	for _, want := range []string{"NET refused", "CROSS refused", "CLAIMED 01SLOTDISPATCH", "INFO 01SLOTDISPATCH", "REPLAY refused", "ENVTOKEN absent", "HARDENED CapEff:0000000000000000 NoNewPrivs:1 Seccomp:" + seccomp} {
		if !strings.Contains(got, want) {
			t.Errorf("probe did not say %q", want)
		}
	}
	for _, d := range dials {
		if !strings.Contains(got, "DIAL "+d+" refused") {
			t.Errorf("the slot reached, or did not try, the host's %s", d)
		}
	}
	if exit.Code != 0 {
		t.Errorf("probe exit %+v", exit)
	}
	if !containerGone(t, cli, slot.h.TaskID()) {
		t.Error("the used slot's container is still there")
	}
	if strings.Contains(g.logs.String(), sl.Token) || strings.Contains(errb.String(), sl.Token) {
		t.Error("the slot token reached a log")
	}
}

// probeClaim runs in a slot container: the token arrives on fd 3 only. It says what it could
// reach and what the gateway answered, one line per check.
func probeClaim() int {
	tok, err := io.ReadAll(os.NewFile(3, "token"))
	if err != nil || len(tok) == 0 {
		fmt.Println("no token on fd 3:", err)
		return 1
	}
	token := string(tok)
	fmt.Println("HARDENED " + hardening())
	if strings.Contains(strings.Join(os.Environ(), "\n"), token) {
		fmt.Println("ENVTOKEN present")
	} else {
		fmt.Println("ENVTOKEN absent")
	}
	if c, err := net.DialTimeout("tcp", "1.1.1.1:443", 2*time.Second); err == nil {
		c.Close()
		fmt.Println("NET open")
	} else {
		fmt.Println("NET refused")
	}
	// Attack: the host's own listeners (loopback, its address, an abstract Unix socket).
	for _, a := range strings.Fields(os.Getenv("PROBE_DIAL")) {
		network, addr, _ := strings.Cut(a, ":")
		if c, err := net.DialTimeout(network, addr, 2*time.Second); err == nil {
			c.Close()
			fmt.Println("DIAL", a, "open")
		} else {
			fmt.Println("DIAL", a, "refused")
		}
	}
	u, sock, slot, ca := os.Getenv(remote.GatewayURLEnv), os.Getenv(remote.GatewaySocketEnv), os.Getenv(remote.SlotEnv), []byte(os.Getenv(remote.CAEnv))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Attack: the slot's token on the bound dispatch's own routes.
	if c, err := workerremote.NewSocketClient(u, sock, "01SLOTDISPATCH", token, ca); err == nil {
		if _, err := c.Info(ctx); err != nil {
			fmt.Println("CROSS refused")
		} else {
			fmt.Println("CROSS opened")
		}
		c.Close()
	}
	c, err := workerremote.ClaimVia(ctx, u, sock, slot, token, ca, os.Stderr)
	if err != nil {
		fmt.Println("CLAIM refused:", err)
		return 3
	}
	fmt.Println("CLAIMED", c.Dispatch())
	if info, err := c.Info(ctx); err == nil {
		fmt.Println("INFO", info.Dispatch)
	} else {
		fmt.Println("INFO failed:", err)
	}
	c.Close()
	_, err = workerremote.ClaimVia(ctx, u, sock, slot, token, ca, os.Stderr)
	var se *workerremote.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
		fmt.Println("REPLAY refused")
	} else {
		fmt.Println("REPLAY answered:", err)
	}
	return 0
}

// The create request of a slot is a cold container's with only what a slot adds: the same
// user, hardening, limits and network mode none; the gateway's socket bound read-only; the
// token on stdin (fd 3), never in the request.
func TestSlotCreateOptions(t *testing.T) {
	p := &Provider{imageID: "sha256:" + strings.Repeat("1", 64), shim: DefaultShimPath, seccomp: "seccomp=/x.json"}
	s := compute.Spec{
		ID:    "ignored",
		Argv:  []string{DefaultShimPath, "worker"},
		Env:   []string{"PATH=/bin"},
		Binds: []compute.Bind{{Src: "/h/bin", Dst: DefaultShimPath}},
		RunAs: &compute.HostUser{UID: 1879048200, GID: 1879048200},
	}
	o := SlotOptions{ID: "s" + strings.Repeat("ab", 16), Token: "agw_SECRETSLOTTOKEN", Home: "/h/home", Holder: "serve-1",
		GatewayURL: "https://gw:8443", GatewayCA: []byte("PEM"), GatewaySocket: "/h/gw.sock"}
	slotOpts, iso, err := p.slotCreateOptions(s, o)
	if err != nil {
		t.Fatal(err)
	}
	cold := s
	cold.ID = o.ID
	cold.Files = []*os.File{nil}
	coldOpts, coldIso, err := p.createOptions(cold)
	if err != nil {
		t.Fatal(err)
	}
	if iso != coldIso {
		t.Errorf("isolation %q, cold %q", iso, coldIso)
	}
	sh, ch := *slotOpts.HostConfig, *coldOpts.HostConfig
	if len(sh.Mounts) != len(ch.Mounts)+1 {
		t.Fatalf("mounts %+v", sh.Mounts)
	}
	gm := sh.Mounts[len(sh.Mounts)-1]
	if gm.Source != "/h/gw.sock" || gm.Target != SlotSocketPath || !gm.ReadOnly {
		t.Errorf("gateway socket mount %+v", gm)
	}
	if tm := sh.Tmpfs[SlotRoot]; !strings.Contains(tm, "mode=0700,uid=1879048200,gid=1879048200") || !strings.Contains(tm, "nosuid,nodev") || SlotRoot != wire.DefaultRoot {
		t.Errorf("slot root tmpfs %q at %s", tm, SlotRoot)
	}
	sh.Tmpfs = maps.Clone(sh.Tmpfs)
	delete(sh.Tmpfs, SlotRoot)
	sh.Mounts, ch.Mounts = nil, nil
	if !reflect.DeepEqual(sh, ch) {
		t.Errorf("a slot's host config differs from a cold container's:\n%+v\n%+v", sh, ch)
	}
	if slotOpts.Config.User != coldOpts.Config.User || !slotOpts.Config.NetworkDisabled || !slotOpts.Config.OpenStdin ||
		!reflect.DeepEqual(slotOpts.Config.Entrypoint, coldOpts.Config.Entrypoint) {
		t.Errorf("config %+v", slotOpts.Config)
	}
	all := slotOpts.Name + strings.Join(slotOpts.Config.Entrypoint, " ") + strings.Join(slotOpts.Config.Env, " ")
	for k, v := range slotOpts.Config.Labels {
		all += k + v
	}
	if strings.Contains(all, "SECRETSLOTTOKEN") {
		t.Fatalf("the slot token is in the create request: %q", all)
	}
	if slotOpts.Name != "agora-slot-"+o.ID || slotOpts.Config.Labels[LabelHolder] != "serve-1" || slotOpts.Config.Labels[LabelHome] != HomeLabel("/h/home") {
		t.Errorf("name %q labels %v", slotOpts.Name, slotOpts.Config.Labels)
	}
}

// StartSlot refuses what a slot must not have: a writable bind (its dispatch's files come
// over the gateway), files (the token is its only one), no socket.
func TestStartSlot_Refuses(t *testing.T) {
	p := &Provider{imageID: "sha256:" + strings.Repeat("1", 64), shim: DefaultShimPath, seccomp: "seccomp=/x.json"}
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := compute.Spec{Argv: []string{"/x"}, RunAs: &compute.HostUser{UID: 5000, GID: 5000}}
	o := SlotOptions{ID: "s" + strings.Repeat("cd", 16), Token: "agw_x", Home: dir, GatewayURL: "https://gw:1", GatewayCA: []byte("P"), GatewaySocket: sock}
	for name, c := range map[string]func(*compute.Spec, *SlotOptions){
		"writable bind": func(s *compute.Spec, _ *SlotOptions) {
			s.Binds = []compute.Bind{{Src: "/a", Dst: "/b", Writable: true}}
		},
		"files":        func(s *compute.Spec, _ *SlotOptions) { s.Files = []*os.File{os.Stdin} },
		"no token":     func(_ *compute.Spec, o *SlotOptions) { o.Token = "" },
		"bad id":       func(_ *compute.Spec, o *SlotOptions) { o.ID = "../x" },
		"not a socket": func(_ *compute.Spec, o *SlotOptions) { o.GatewaySocket = dir },
		"host network": func(s *compute.Spec, _ *SlotOptions) { s.Network = true },
		"root":         func(s *compute.Spec, _ *SlotOptions) { s.RunAs = &compute.HostUser{} },
	} {
		s2, o2 := s, o
		c(&s2, &o2)
		if _, err := p.StartSlot(context.Background(), s2, o2); err == nil {
			t.Errorf("%s: StartSlot accepted it", name)
		}
	}
}

// Attack: the holder is killed with -9 while its slot container waits for a claim. The slot
// is never claimed (the gateway refuses the waiting worker once the hold is free), a restart's
// sweep revokes it and removes its container, and its token opens nothing after.
func TestSlot_HolderKilledSweptNeverClaimed(t *testing.T) {
	p := newTestProvider(t, Options{})
	cli := engine(t)
	g := startSlotGateway(t, "")
	spec := slotSpec(t, "probe-claim")
	// The holder: this test binary in hold-slot mode, making the slot and its container.
	cmd := exec.Command(os.Args[0], "hold-slot")
	cmd.Env = append(os.Environ(),
		"SLOTTEST_DIR="+g.dir, "SLOTTEST_IMAGE="+toolchainImage(t), "SLOTTEST_HOST="+testHost(),
		"SLOTTEST_UID="+itoa(int(spec.RunAs.UID)))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 256)
	n, _ := io.ReadAtLeast(stdout, line, 1)
	slotID, token, ok := strings.Cut(strings.TrimSpace(string(line[:n])), " ")
	if !ok || !remote.ValidSlotID(slotID) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder said %q", line[:n])
	}
	// The container waits on its claim; then the holder dies.
	agoratest.WaitFor(t, time.Minute, "the slot's claim to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(slotID) == 1 })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	// The waiting worker is refused once the hold is free (the gateway checks the holder
	// while a claim waits), so the container ends without a dispatch.
	var logs string
	agoratest.Eventually(t, 30*time.Second, "the killed holder's slot container to end", func() error {
		res, err := listContainers(context.Background(), cli, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelSlot+"="+slotID)})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("slot container of the killed holder: %v %v", res.Items, err)
		}
		if res.Items[0].State == "running" {
			return errors.New("it still waits")
		}
		logs = containerLogs(t, cli, res.Items[0].ID)
		return nil
	})
	if !strings.Contains(logs, "CLAIM refused") || strings.Contains(logs, "CLAIMED") {
		t.Fatalf("the killed holder's slot container said:\n%s", logs)
	}
	// A restart sweeps: the slot is revoked (by the refused claim already, or now) and its
	// container removed.
	if _, err := g.slots.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(g.slots.Dir, slotID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed holder's slot stands after the sweep: %v", err)
	}
	live := func(id string) bool {
		_, err := os.Stat(filepath.Join(g.slots.Dir, id))
		return err == nil
	}
	removed, err := p.SweepSlots(context.Background(), g.dir, live)
	if err != nil || len(removed) != 1 || removed[0] != slotID {
		t.Fatalf("SweepSlots: %v %v, want [%s]", removed, err, slotID)
	}
	res, err := listContainers(context.Background(), cli, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelSlot+"="+slotID)})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("the killed holder's slot container is still there: %v %v", res.Items, err)
	}
	// Its token opens nothing: the claim is refused, never waits for a dispatch.
	sess, err := g.reg.Export(context.Background(), compute.Spec{ID: "01SLOTDISPATCH"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = workerremote.ClaimVia(ctx, g.url, g.sock, slotID, token, g.certs.CAPEM, nil)
	var se *workerremote.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("claim with a swept slot's token: %v, want a 401", err)
	}
}

// holdSlot is the killed holder of TestSlot_HolderKilledSweptNeverClaimed: it makes a slot and
// its container, says the slot's id and token on stdout, and waits to be killed.
func holdSlot() int {
	dir := os.Getenv("SLOTTEST_DIR")
	ctx := context.Background()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(dir, "keys"), []string{gatewayHost})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sl, err := (&netgw.Slots{Dir: filepath.Join(dir, "slots")}).Create(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := New(ctx, Options{Host: os.Getenv("SLOTTEST_HOST"), Image: os.Getenv("SLOTTEST_IMAGE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	exe, _ := os.Executable()
	uid := uint32(atoiOr(os.Getenv("SLOTTEST_UID"), 0))
	s := compute.Spec{Argv: []string{DefaultShimPath, "probe-claim"}, Env: []string{"PATH=/bin"},
		Binds: []compute.Bind{{Src: exe, Dst: DefaultShimPath}}, RunAs: &compute.HostUser{UID: uid, GID: uid}}
	if _, err := p.StartSlot(ctx, s, SlotOptions{ID: sl.ID, Token: sl.Token, Home: dir, Holder: "hold-slot",
		GatewayURL: "https://" + gatewayHost + ":8443", GatewayCA: certs.CAPEM, GatewaySocket: filepath.Join(dir, "gw.sock")}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(sl.ID, sl.Token)
	select {}
}

// containerLogs is what container id wrote, stdout and stderr together.
func containerLogs(t testing.TB, cli *client.Client, id string) string {
	t.Helper()
	rc, err := cli.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs of %s: %v", id, err)
	}
	defer rc.Close()
	var out, errb syncBuffer
	stdcopy.StdCopy(&out, &errb, rc)
	return out.String() + errb.String()
}

// hardening reads, inside a container, what the kernel says of the process: its effective
// capabilities, no_new_privs and seccomp mode.
func hardening() string {
	b, _ := os.ReadFile("/proc/self/status")
	var parts []string
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if k == "CapEff" || k == "NoNewPrivs" || k == "Seccomp" {
			parts = append(parts, k+":"+strings.TrimSpace(v))
		}
	}
	return strings.Join(parts, " ")
}

// A slot's worker gets its whole dispatch over the gateway: after the claim it fetches the
// dispatch's mounts into its own tmpfs (the cold container's bind mounts), a read-only one
// left without write permission, and uploads the result mount before it exits; what it writes
// reaches the dispatch's output and the host's out directory through the gateway alone.
func TestSlot_WorkerFetchesAndUploadsOverGateway(t *testing.T) {
	p := newTestProvider(t, Options{})
	g := startSlotGateway(t, "")
	bundle, out := filepath.Join(g.dir, "bundle"), filepath.Join(g.dir, "out")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(bundle, 0o755))
	must(os.MkdirAll(out, 0o755))
	must(os.WriteFile(filepath.Join(bundle, "spec.txt"), []byte("hello from the host"), 0o644))
	var dout, derr syncBuffer
	sess, err := g.reg.Export(context.Background(), compute.Spec{ID: "01SLOTWORK", Stdout: &dout, Stderr: &derr,
		Binds: []compute.Bind{{Src: bundle, Dst: "/agora/bundle"}, {Src: out, Dst: "/agora/out", Writable: true, Result: true}}})
	must(err)
	defer sess.Close()
	sl, err := g.slots.Create(context.Background())
	must(err)
	defer sl.Close()
	var cout, cerr syncBuffer
	slot, err := p.StartSlot(t.Context(), slotSpec(t, "probe-slot-worker"), g.options(sl, &cout, &cerr))
	if err != nil {
		t.Fatalf("StartSlot: %v", err)
	}
	defer slot.Discard()
	must(sl.Bind(t.Context(), sess.Dispatch, sess.Token))
	exit, err := slot.Handle().Wait()
	must(err)
	must(sess.Close())
	t.Logf("dispatch stdout:\n%s\ncontainer:\n%s%s", dout.String(), cout.String(), cerr.String())
	if exit.Code != 0 {
		t.Fatalf("slot worker exit %+v", exit)
	}
	for _, want := range []string{"SPEC hello from the host", "BUNDLE read-only"} {
		if !strings.Contains(dout.String(), want) {
			t.Errorf("the dispatch's output (over the gateway) lacks %q", want)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "result.txt"))
	if err != nil || string(b) != "done" {
		t.Fatalf("result uploaded over the gateway: %q %v", b, err)
	}
}

// probeSlotWorker is a slot's worker in miniature: claim, fetch, say what it found, upload.
func probeSlotWorker() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := workerremote.StartSlot(ctx, SlotRoot, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "StartSlot:", err)
		return 3
	}
	b, err := os.ReadFile(SlotRoot + "/bundle/spec.txt")
	fmt.Fprintf(w.Stdout, "SPEC %s %v\n", b, err)
	if err := os.WriteFile(SlotRoot+"/bundle/planted", []byte("x"), 0o644); err != nil {
		fmt.Fprintln(w.Stdout, "BUNDLE read-only")
	} else {
		fmt.Fprintln(w.Stdout, "BUNDLE writable")
	}
	if err := os.WriteFile(SlotRoot+"/out/result.txt", []byte("done"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write result:", err)
		return 4
	}
	if err := w.Finish(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Finish:", err)
		return 5
	}
	return 0
}

// hostIP is an address of this host's other than loopback, "" when it has none.
func hostIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// Attack: several workers hold one slot's token (a copied token, a container started twice)
// and claim at once: the bound dispatch goes to exactly one of them, the others are refused.
func TestSlot_ConcurrentClaimsOneWinner(t *testing.T) {
	p := newTestProvider(t, Options{})
	g := startSlotGateway(t, "")
	sess, err := g.reg.Export(context.Background(), compute.Spec{ID: "01SLOTDISPATCH"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sl, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	const n = 3
	outs := make([]*syncBuffer, n)
	slots := make([]*Slot, n)
	for i := range n {
		outs[i] = &syncBuffer{}
		o := g.options(sl, outs[i], io.Discard)
		spec := slotSpec(t, "probe-claim")
		// Each container a name of its own, the same slot and token.
		o.ID = sl.ID
		s2, err := p.startSlotNamed(t.Context(), spec, o, "agora-slot-"+sl.ID+"-"+itoa(i))
		if err != nil {
			t.Fatalf("StartSlot %d: %v", i, err)
		}
		defer s2.Discard()
		slots[i] = s2
	}
	// The workers claim: as many as the gateway lets wait at once do (the others are told to
	// ask again, and find the slot claimed).
	agoratest.WaitFor(t, time.Minute, "the workers' claims to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(sl.ID) == netgw.MaxClaimWaiters })
	if err := sl.Bind(t.Context(), sess.Dispatch, sess.Token); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	won := 0
	for i, s := range slots {
		if _, err := s.Handle().Wait(); err != nil {
			t.Fatal(err)
		}
		o := outs[i].String()
		switch {
		case strings.Contains(o, "CLAIMED 01SLOTDISPATCH"):
			won++
		case !strings.Contains(o, "CLAIM refused"):
			t.Errorf("worker %d neither claimed nor was refused:\n%s", i, o)
		}
	}
	if won != 1 {
		t.Fatalf("%d workers claimed the one slot, want exactly 1", won)
	}
}

// startSlotNamed is StartSlot under another container name (tests: several containers of
// one slot, as an attacker with a copied token would start).
func (p *Provider) startSlotNamed(ctx context.Context, s compute.Spec, o SlotOptions, name string) (*Slot, error) {
	opts, iso, err := p.slotCreateOptions(s, o)
	if err != nil {
		return nil, err
	}
	opts.Name = name
	h, err := p.startCreated(ctx, context.WithoutCancel(ctx), opts, iso, []byte(o.Token), o.Stdout, o.Stderr, 0)
	if err != nil {
		return nil, err
	}
	return &Slot{ID: o.ID, shape: o.Shape, h: h}, nil
}
