package netgw

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Attacks on the gateway and the remote worker.

// podUID is the uid the tests run a pod's worker as: a pod runs non-root (runAsNonRoot).
const podUID = 65534

// podDir is a fresh directory that the pod's uid owns, below a parent it may traverse
// (t.TempDir's parents are root's, mode 0700).
func podDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agora-redteam4-pod-*")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	must(t, os.Chmod(d, 0o755))
	return d
}

// chownTree hands every entry below dir to uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	must(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}))
}

// TestRedTeam4_UnreadableOutputIsNotAGatewayOutage: blame-shifting. An agent in its pod
// (which runs as a non-root uid, the worker's own) leaves a file in out/outputs that nobody
// may read (chmod 000). The worker's upload packs the out directory, cannot open that file,
// and, before the fix, took the packing error for a gateway that did not answer: it repacked
// and resent for OutageLimit (3 minutes), then exited 75, which the host records
// failed/gateway-unreachable ("the agent is not blamed") and plans retry always, even with
// on_worker_failed: false. A local failure is never an outage: the worker must not retry it,
// and what it could pack (result.json saying what went wrong) must reach the host.
func TestRedTeam4_UnreadableOutputIsNotAGatewayOutage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: running the worker as a pod's non-root uid needs root")
	}
	g := startGateway(t)
	script := `mkdir -p ../out/outputs && echo hidden > ../out/outputs/locked && chmod 000 ../out/outputs/locked`
	h := newHostStage(t, "01RT4UNREADABLE", script)
	var stdout, stderr syncBuffer
	s, err := g.reg.Export(t.Context(), h.spec(t, &stdout, &stderr, `{"API_KEY":"k"}`))
	must(t, err)
	defer s.Close()

	stage := podDir(t)
	fetch := exec.CommandContext(t.Context(), agoratest.Worker(agoraBin), "worker", "fetch")
	fetch.Env = podEnv(g, h.id, s.Token, remote.StageEnv+"="+stage)
	if out, err := fetch.CombinedOutput(); err != nil {
		t.Fatalf("agora worker fetch: %v\n%s", err, out)
	}
	root := podDir(t)
	for _, m := range s.Mounts {
		dst := workerremote.Local(root, m.Dst)
		must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		if m.Fetch {
			must(t, os.Rename(filepath.Join(stage, m.Name), dst))
		} else {
			must(t, os.Mkdir(dst, 0o755))
		}
	}
	chownTree(t, root, podUID)
	chownTree(t, stage, podUID)

	// Well below OutageLimit: a worker still retrying then took its own failure for an outage.
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	worker := exec.CommandContext(ctx, filepath.Join(stage, wire.BinDir, wire.BinFile), "worker")
	worker.Env = podEnv(g, h.id, s.Token, wire.RootEnv+"="+root)
	worker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: podUID, Gid: podUID}}
	var podLog syncBuffer
	worker.Stdout, worker.Stderr = &podLog, &podLog
	err = worker.Run()
	if ctx.Err() != nil {
		t.Fatalf("the worker was still retrying its upload after 45 s: a local packing failure taken for a gateway outage\n%s",
			truncateForTest(podLog.String()))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == remote.ExitGatewayUnreachable {
		t.Fatalf("the worker exited %d (gateway unreachable) for an output it could not read:\n%s",
			remote.ExitGatewayUnreachable, truncateForTest(podLog.String()))
	}
	b, rerr := os.ReadFile(filepath.Join(h.out, wire.ResultFile))
	if rerr != nil {
		t.Fatalf("no result.json reached the host (%v); worker: %v\n%s", rerr, err, truncateForTest(podLog.String()))
	}
	res, perr := wire.ParseResult(b)
	must(t, perr)
	if res.Status == wire.StatusOK || !strings.Contains(res.Detail, "locked") {
		t.Errorf("result %s/%s %q: want the worker's own failure naming the unreadable output", res.Status, res.Reason, res.Detail)
	}
}

// TestRedTeam4_ClosingAReplacedSessionLeavesTheNewOne: a supervisor's session was replaced by
// another's export of the same dispatch (a Start judged stale, whose claim another process
// took over: compute/kubernetes's claim.go). When the replaced one closes its session at last,
// it must end only its own: before the fix, Close removed whatever session.json and directory
// stood at the dispatch's path, the winner's, so the winner's pod lost its token (401 on
// everything) and its streams' sockets.
func TestRedTeam4_ClosingAReplacedSessionLeavesTheNewOne(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01RT4REPLACED")
	stale := g.export(t, l)
	winner := g.export(t, l)
	must(t, stale.Close())
	if code, msg := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", winner.Token, nil); code != 200 {
		t.Fatalf("the winner's token after the replaced session's Close: %d %s, want 200", code, msg)
	}
	if _, err := os.Stat(filepath.Join(g.reg.Dir, l.id, stdoutSocket)); err != nil {
		t.Errorf("the winner's stream socket after the replaced session's Close: %v", err)
	}
	must(t, winner.Close())
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", winner.Token, nil); code != 401 {
		t.Errorf("the winner's token after its own Close: %d, want 401", code)
	}
}

// TestRedTeam4_UploadOutlivingItsSessionPlacesNothing: an upload whose token was good when it
// began, but whose session was revoked while its body was still coming (the reaper revoked a
// dead supervisor's session; here a new export follows, as a restarted start would make). The
// gateway must not place it: before the fix it did, into the out directory, and wrote its
// "stored" mark into the new session's directory, so the new session's own upload was refused
// 409 "uploaded already".
func TestRedTeam4_UploadOutlivingItsSessionPlacesNothing(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01RT4LATEUPLOAD")
	old := g.export(t, l)
	body := tarOf(t, tarEntry{name: "result.json", body: "stale"}, tarEntry{name: "big", body: strings.Repeat("s", 1<<20)})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	tc, err := tls.Dial("tcp", strings.TrimPrefix(g.url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	must(t, err)
	defer tc.Close()
	_, err = io.WriteString(tc, "PUT "+remote.RoutePrefix+l.id+"/mounts/out HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+old.Token+
		"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	must(t, err)
	_, err = tc.Write(body[:len(body)/2])
	must(t, err)
	agoratest.WaitFor(t, 30*time.Second, "the gateway extracting the upload", func() bool { return len(staging(t, l.out)) > 0 })

	must(t, (&Registry{Dir: g.reg.Dir}).Revoke(t.Context(), l.id))
	fresh := g.export(t, l)
	_, err = tc.Write(body[len(body)/2:])
	must(t, err)
	tc.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			t.Errorf("the upload of a revoked session was answered 204")
		}
	}
	if b, err := os.ReadFile(filepath.Join(l.out, "result.json")); err == nil {
		t.Errorf("the upload of a revoked session was placed: out/result.json = %q", b)
	}
	if code, msg := g.putOut(t, l, fresh, tarOf(t, tarEntry{name: "result.json", body: "fresh"})); code != 204 {
		t.Fatalf("the new session's own upload: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "fresh")
}

// listening reports whether a Unix socket at path is listening (/proc/net/unix).
func listening(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is __SO_ACCEPTCON.
		if len(f) == 8 && f[7] == path && f[3] == "00010000" {
			return true
		}
	}
	return false
}

// TestRedTeam4_SecretsLostInAnOutageAreTheGatewaysFault: the secrets object is served once
// (files/0: the exporter stops listening after its first connection). A gateway that dies
// while it relays it (kill -9 of serve while pods start) has used that once up, and the
// worker's retry after the restart gets 410. Before the fix the worker failed with exit 1,
// recorded worker-failed, as if something of the dispatch's own were wrong, although the agent
// never ran: it is the gateway's outage, exit 75 (gateway-unreachable), which plans retry.
func TestRedTeam4_SecretsLostInAnOutageAreTheGatewaysFault(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01RT4SECRETS")
	spec := l.spec(t)
	rd, wr, err := os.Pipe()
	must(t, err)
	defer rd.Close()
	defer wr.Close()
	spec.Files = []*os.File{rd} // written only once the gateway relays it
	s, err := g.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	f0 := filepath.Join(g.reg.Dir, l.id, filePrefix+"0")
	if !listening(t, f0) {
		t.Fatalf("%s is not listening", f0)
	}
	c := g.client(t, l.id, s.Token)
	got := make(chan error, 1)
	go func() { _, err := c.File(t.Context(), 0, workerremote.MaxSecretsFile); got <- err }()
	agoratest.WaitFor(t, 30*time.Second, "the gateway taking the secrets from the exporter", func() bool { return !listening(t, f0) })
	g.close() // the gateway dies relaying it (its handler is cut off after the shutdown grace)
	wr.Write(l.secrets)
	wr.Close()
	g.restart(t)
	err = <-got
	if err == nil {
		t.Fatal("the worker read the secrets the dead gateway was relaying")
	}
	if code := workerremote.ExitCode(err); code != remote.ExitGatewayUnreachable {
		t.Errorf("the worker exits %d for %v; want %d: the gateway's outage lost the once-only file", code, err, remote.ExitGatewayUnreachable)
	}

	// No outage, and someone else (a token thief) had the file first: not the gateway's fault.
	l2 := stageLayout(t, "01RT4SECRETSTHIEF")
	s2 := g.export(t, l2)
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l2.id+"/files/0", s2.Token, nil); code != 200 {
		t.Fatalf("the thief's GET files/0: %d", code)
	}
	_, err = g.client(t, l2.id, s2.Token).File(t.Context(), 0, workerremote.MaxSecretsFile)
	if code := workerremote.ExitCode(err); err == nil || code == remote.ExitGatewayUnreachable {
		t.Errorf("the worker's GET files/0 after another's, with no outage: %v (exit %d), want refused and not an outage", err, code)
	}
}

// TestRedTeam4_TunnelsLeaveTheUploadItsReserve: a dispatch's reserve (the connections no
// other dispatch can take) is meant for its session, streams, upload "and a few tunnels".
// Before the fix its tunnels could take all of it: a subagent run wide (a plan's many tasks)
// whose agents open every tunnel they may fills the shared pool, and each agent, when the
// worker stops it, leaves tunnels open at the gateway (a model call or a CONNECT the host
// has not answered yet: the gateway's side ends only when the host's does, up to the model
// timeout). The worker's upload then found no room anywhere, got 429 for OutageLimit and
// exited 75: recorded gateway-unreachable, and retried, for the agents' own doing. Tunnels
// now never take the last ReserveForRequests connections of their dispatch's reserve.
func TestRedTeam4_TunnelsLeaveTheUploadItsReserve(t *testing.T) {
	defer func(d time.Duration) { workerremote.OutageLimit = d }(workerremote.OutageLimit)
	workerremote.OutageLimit = 2 * time.Second
	g := startGatewayWith(t, workerVersion(), func(s *Server) {
		s.MaxConns, s.ReservePerDispatch, s.MaxConnsPerDispatch = 4, ReserveForRequests+2, 64
	})
	var tunnels []net.Conn
	defer func() {
		for _, c := range tunnels {
			c.Close()
		}
	}()
	openAll := func(c *workerremote.Client) {
		for {
			conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
			var se *workerremote.StatusError
			if errors.As(err, &se) && se.Code == 429 {
				return
			}
			must(t, err)
			tunnels = append(tunnels, conn)
		}
	}
	// Other dispatches of the same subagent fill the shared pool with tunnels.
	for _, id := range []string{"01RT4WIDEA", "01RT4WIDEB"} {
		l := stageLayout(t, id)
		openAll(g.client(t, l.id, g.export(t, l).Token))
	}
	// This dispatch: its worker's session, its agent's tunnels, then the upload.
	l := stageLayout(t, "01RT4WIDEC")
	s := g.export(t, l)
	c := g.client(t, l.id, s.Token)
	_, err := c.Info(t.Context())
	must(t, err)
	c.Close() // the client keeps an idle connection 30 s; an agent runs longer
	openAll(c)
	t.Logf("%d tunnels open", len(tunnels))
	out := t.TempDir()
	must(t, os.WriteFile(filepath.Join(out, wire.ResultFile), []byte("{}"), 0o600))
	if err := c.Upload(t.Context(), remote.Mount{Name: "out", Dst: wire.OutPath, Result: true}, out); err != nil {
		t.Fatalf("the upload with the dispatch's tunnels and the shared pool full: %v", err)
	}
	checkFile(t, filepath.Join(l.out, wire.ResultFile), "{}")
}

// TestRedTeam4_StreamOfAReplacedSessionReachesOnlyItsOwnWriter: a stream's POST is
// authorised once and then flows for as long as the worker writes. When its session is
// replaced (exported again with another token and other writers) while it flows, what the old
// stream carries must never reach the new session's writers, and once its own exporter closes
// the stream ends. (Held: the gateway relays a stream to the exporter's connection it dialled
// at the start, never to whatever socket the path holds later.)
func TestRedTeam4_StreamOfAReplacedSessionReachesOnlyItsOwnWriter(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01RT4STREAMREPLACED")
	old := g.export(t, l)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", g.url+remote.RoutePrefix+l.id+"/streams/stdout", pr)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+old.Token)
	resp, err := g.httpClient().Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	io.WriteString(pw, "before-replace\n")
	agoratest.WaitFor(t, 30*time.Second, "the first line at the old writer", func() bool { return strings.Contains(l.stdout.String(), "before-replace") })

	l2 := *l
	l2.stdout, l2.stderr = &syncBuffer{}, &syncBuffer{}
	fresh := g.export(t, &l2)
	io.WriteString(pw, "after-replace\n")
	agoratest.WaitFor(t, 30*time.Second, "the old stream's line at its own writer", func() bool { return strings.Contains(l.stdout.String(), "after-replace") })
	if strings.Contains(l2.stdout.String(), "after-replace") {
		t.Errorf("the replaced session's stream reached the new session's writer")
	}
	must(t, old.Close())
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(DrainTimeout + 10*time.Second):
		t.Errorf("the stream of a closed session still flows")
	}
	pw.Close()
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", fresh.Token, nil); code != 200 {
		t.Errorf("the new session after the old one's close: %d", code)
	}
}

// TestRedTeam4_ThunderingHerd: many pods lose the gateway together (serve restarted) and come
// back at once, far more than its unauthenticated pools hold (which close their oldest
// connection to admit a new one). The jittered backoff spreads them: every one of them gets
// its session within the outage limit, none is shut out for good. (Held.)
func TestRedTeam4_ThunderingHerd(t *testing.T) {
	const pods = 48
	g := startGatewayWith(t, workerVersion(), func(s *Server) { s.MaxPending, s.MaxPendingPerSource = 4, 4 })
	clients := make([]*workerremote.Client, pods)
	for i := range clients {
		l := stageLayout(t, fmt.Sprintf("01RT4HERD%02d", i))
		clients[i] = g.client(t, l.id, g.export(t, l).Token)
	}
	g.close()
	tries, back := g.away(t)
	errs := make(chan error, pods)
	for _, c := range clients {
		go func() { _, err := c.Info(t.Context()); errs <- err }()
	}
	// The pods are retrying: twice as many tries as pods reached the away gateway.
	agoratest.WaitFor(t, time.Minute, "the pods' tries at the away gateway", func() bool { return tries.Load() >= 2*pods })
	back()
	g.restart(t)
	for range pods {
		if err := <-errs; err != nil {
			t.Errorf("a pod after the restart: %v", err)
		}
	}
	t.Logf("evictions logged: %v", strings.Contains(g.logs.String(), "closed the oldest"))
}

// TestRedTeam4_WideFloodDoesNotEvictOtherPods: a subagent run wide, each of its agents
// flooding the gateway from its own pod's address with connections that never show a token,
// as fast as it can. Together they hold the whole unauthenticated pool (MaxPending). A pod of
// another dispatch must still get its requests and tunnels through: a flooder whose own
// source is at its cap evicts its own oldest connection, never another source's, so the
// flood cannot push the other pod's handshake out. (Held.)
func TestRedTeam4_WideFloodDoesNotEvictOtherPods(t *testing.T) {
	const flooders, perSource = 8, 4
	g := startGatewayWith(t, workerVersion(), func(s *Server) {
		s.MaxPending, s.MaxPendingPerSource = flooders*perSource, perSource
	})
	l := stageLayout(t, "01RT4FLOODED")
	s := g.export(t, l)
	addr := strings.TrimPrefix(g.url, "https://")
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for i := range flooders {
		src := fmt.Sprintf("127.0.0.%d", 10+i)
		flood.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, err := d.Dial("tcp", addr); err == nil {
					held = append(held, c)
				}
				if len(held) > 4*perSource { // keep what the gateway may still hold; drop the rest
					held[0].Close()
					held = held[1:]
				}
			}
		})
	}
	agoratest.WaitFor(t, 30*time.Second, "the flooders holding the whole unauthenticated pool", func() bool {
		g.srv.conns.mu.Lock()
		defer g.srv.conns.mu.Unlock()
		return g.srv.conns.order.Len() >= flooders*perSource-2
	})
	c := g.client(t, l.id, s.Token)
	for i := range 10 {
		c.Close() // a fresh connection each time, through the flood
		if _, err := c.Info(t.Context()); err != nil {
			t.Fatalf("request %d of a pod during the flood: %v", i+1, err)
		}
		conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
		if err != nil {
			t.Fatalf("tunnel %d of a pod during the flood: %v", i+1, err)
		}
		conn.Close()
	}
	close(stop)
	flood.Wait()
}

// TestRedTeam4_LockFilesGoWithTheirSessions: the per-dispatch lock files (reglock.go) do not
// pile up: a closed or revoked session leaves none; a standing one keeps its own.
func TestRedTeam4_LockFilesGoWithTheirSessions(t *testing.T) {
	g := startGateway(t)
	closed, revoked := stageLayout(t, "01RT4LOCKCLOSED"), stageLayout(t, "01RT4LOCKREVOKED")
	must(t, g.export(t, closed).Close())
	g.export(t, revoked)
	must(t, g.reg.Revoke(t.Context(), revoked.id))
	standing := stageLayout(t, "01RT4LOCKSTANDING")
	g.export(t, standing)
	ents, err := os.ReadDir(filepath.Join(g.reg.Dir, lockDir))
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != standing.id {
		t.Errorf("lock files %v, want only the standing session's", ents)
	}
}

// TestRedTeam4_HostDiskFullIsNoRefusalOfTheUpload: the host's disk under the stage filled up
// (other dispatches' uploads, each within its own cap, do that on a wide run) while a worker
// uploaded. Writing its files failed with ENOSPC, and the gateway took that for a refusal of
// what the upload held: 422, and the mark "refused" for good, so even the worker's retry
// once space was freed was refused 409, and the dispatch ended worker-failed for the host's
// disk. A failure of the host's own storage refuses nothing: 503, no mark, and the same
// upload is stored once there is room.
func TestRedTeam4_HostDiskFullIsNoRefusalOfTheUpload(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: mounting a small tmpfs under the stage needs root")
	}
	g := startGateway(t)
	l := stageLayout(t, "01RT4DISKFULL")
	// The out directory's file system (its staging is beside it): 256 KiB.
	fsDir := filepath.Join(t.TempDir(), "small")
	must(t, os.Mkdir(fsDir, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", fsDir).CombinedOutput(); err != nil {
		t.Skipf("SKIP: mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", fsDir).Run() })
	l.out = filepath.Join(fsDir, "out")
	must(t, os.Mkdir(l.out, 0o700))
	s := g.export(t, l)
	body := tarOf(t, tarEntry{name: "result.json", body: "{}"}, tarEntry{name: "big", body: strings.Repeat("d", 512<<10)})
	code, msg := g.putOut(t, l, s, body)
	if code == 204 {
		t.Fatalf("a 512 KiB upload into 256 KiB was stored")
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("the upload with the host's disk full: %d %s, want 503 (the host's failure: retry)", code, msg)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=4m", fsDir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	if code, msg := g.putOut(t, l, s, body); code != 204 {
		t.Fatalf("the same upload once the disk has room: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "{}")
}
