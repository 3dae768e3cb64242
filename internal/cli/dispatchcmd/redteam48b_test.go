package dispatchcmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/peercred"
)

// The
// resident's declines (declined() for every error of handoffRunner.Prepare, out() vs done())
// and its drain. What broke was fixed: a run Prepare returned is always called (with
// api.ErrNotStarted when its stream ended first), and only a [*api.Declined] is said
// and counted as a decline, never a malformed request's text. These build a real resident
// (the type dispatchResidentRun runs) over a real service.Server on a socket Listen made, and
// a peer that is this test binary run as `... dispatch run` (peerNotDispatchRun passes), so
// Prepare gets past every check of the peer, as a person's CLI does.

// rt48bPeerSock, set in a child of this test binary, makes it (redTeam48bPeer, from
// TestMain) post the bodies in rt48bPeerBodies (a JSON array of strings) to that socket's
// hand-off route, print each answer's status, and exit.
const (
	rt48bPeerSock   = "AGORA_RT48B_PEER_SOCK"
	rt48bPeerBodies = "AGORA_RT48B_PEER_BODIES"
)

// redTeam48bPeer is the whole run of the peer process of the tests below, when
// rt48bPeerSock is set; TestMain calls it first.
func redTeam48bPeer() {
	sock := os.Getenv(rt48bPeerSock)
	if sock == "" {
		return
	}
	var bodies []string
	if err := json.Unmarshal([]byte(os.Getenv(rt48bPeerBodies)), &bodies); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	var taker int32
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err == nil {
			if cred, err := peercred.Of(c); err == nil {
				taker = cred.Pid
			}
		}
		return c, err
	}}}
	for _, b := range bodies {
		// Each with its proof, as the CLI sends it: what is attacked is past the server's
		// check of the caller, in Prepare.
		if resp, err := hc.Post("http://agora"+api.HandoffProofPath, "application/json", nil); err == nil {
			var ch api.HandoffChallenge
			if json.NewDecoder(resp.Body).Decode(&ch) == nil {
				if secret, err := callerctx.Answer(taker, ch.FD); err == nil {
					b = fmt.Sprintf(`{"proof_fd":%d,"proof":%q,`, ch.FD, secret) + strings.TrimPrefix(b, "{")
				}
			}
			resp.Body.Close()
		}
		resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json", strings.NewReader(b))
		if err != nil {
			fmt.Printf("RT48B ERR %v\n", err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Printf("RT48B STATUS %d\n", resp.StatusCode)
	}
	os.Exit(0)
}

// rt48bPeer starts this test binary as a `dispatch run` peer posting bodies to sock.
func rt48bPeer(t *testing.T, sock string, bodies []string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(bodies)
	// Its command line's first words are "dispatch run", as peerNotDispatchRun wants.
	c := exec.Command(exe, "dispatch", "run")
	c.Env = append(os.Environ(), rt48bPeerSock+"="+sock, rt48bPeerBodies+"="+string(js))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c, &out
}

// rt48bResident is a resident as dispatchResidentRun builds it (its log at info, the
// server's at warn, both into one resident.log), serving on a socket Listen made in a fresh
// directory, whose runner's agora.yaml is cfgFile with the digest of cfg. The runner has no
// dispatcher: a run it takes would panic (net/http recovers it; the resident's done still
// runs). The returned request body passes every check of Prepare but the ones the test aims.
type rt48bRig struct {
	r       *resident
	srv     *service.Server
	ln      *service.Listener
	sock    string
	log     *agoratest.SyncBuffer
	stop    context.CancelFunc
	served  chan error
	okBody  map[string]any
	cfgFile string
}

func rt48bResident(t *testing.T, cfgFile string, cfg []byte) *rt48bRig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	running, err := os.Stat("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rt48b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o700)
	sock := filepath.Join(dir, residentSocket)
	ln, err := service.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	buf := &agoratest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	quiet := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hr := &handoffRunner{f: &cmdutil.Factory{}, home: "/rt48b/home", exe: exe, env: "rt48b-env", cfgFile: cfgFile,
		cfgSum: sha256.Sum256(cfg), running: running}
	r := &resident{runner: hr, idle: time.Hour, ln: ln, serveSock: filepath.Join(dir, home.OrchSocket), last: time.Now(), log: log}
	srv := r.server(quiet.Handler())
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { stop(); ln.Close() })
	return &rt48bRig{r: r, srv: srv, ln: ln, sock: sock, log: buf, stop: stop, served: served, cfgFile: cfgFile,
		okBody: map[string]any{"home": "/rt48b/home", "exe": exe, "env": "rt48b-env", "subagent": "ok"}}
}

func (g *rt48bRig) body(extra map[string]any) string {
	m := map[string]any{}
	for k, v := range g.okBody {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestRedTeam48b_SignalDuringPrepareHangsDrain: a resident stopped by a signal (SIGTERM,
// the Ctrl-C of a foreground `agora dispatch resident`, a system shutdown) while a hand-off's
// Prepare is running. Its Serve context ends with the signal, so the server's stream refuses
// every frame (errServeStopping); Prepare succeeds and returns its run with the hand-off
// counted in flight, the server fails to send the handle frame and returns without calling
// the run, and nothing ever counts the hand-off out: drain() waits forever. The resident
// never exits, holds resident.lock (no other resident can start for the home) and
// `agora dispatch resident --stop` waits on it for good. Prepare is held here at its
// agora.yaml read (a FIFO) so the signal lands inside it every time; in the field the window
// is Prepare's /proc reads and user lookup.
func TestRedTeam48b_SignalDuringPrepareHangsDrain(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agora.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := []byte("resident: {idle: 1h}\n")
	g := rt48bResident(t, fifo, cfg)
	peer, out := rt48bPeer(t, g.sock, []string{g.body(nil)})
	// Prepare is in: it counted itself in flight and waits on agora.yaml.
	for deadline := time.Now().Add(20 * time.Second); g.r.inflight.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the hand-off never reached Prepare; peer:\n%s\nlog:\n%s", out, g.log)
		}
	}
	// The signal: dispatchResidentRun's ctx (and so Serve's) ends, watch returns, the
	// listener closes.
	g.stop()
	g.ln.Close()
	// Prepare goes on: agora.yaml is read as it was.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(cfg)
	w.Close()
	drained := make(chan struct{})
	go func() { g.r.drain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(15 * time.Second):
		peer.Process.Kill()
		peer.Wait()
		t.Errorf("a resident signalled while a hand-off was in Prepare hangs in drain for good: %d hand-off(s) still counted in flight, %d taken\npeer:\n%s\nresident.log:\n%s",
			g.r.inflight.Load(), g.srv.Handoffs(), out, g.log)
	}
}

// TestRedTeam48b_BadGrantsFlood: declined() logs every error of handoffRunner.Prepare as a
// "hand-off declined" with err.Error() as its reason, rate-limited per reason. One error is
// no decline and carries the peer's own text: the grants a peer sends that do not decode
// (`hand-off request: grants: ...`, a 400 to the CLI, not a 409). Each distinct text is a new
// reason, so said at once (and past 64 the memory starts over), and logRefusals writes a
// "refused" line for each 400 besides: a peer (`agora dispatch run` of this binary, as its
// checks want) that varies a key grows resident.log by two lines a request, the flood
// already bounded for 409s, and writes text of its choosing into it.
func TestRedTeam48b_BadGrantsFlood(t *testing.T) {
	cfg := []byte("x: 1\n")
	cfgFile := filepath.Join(t.TempDir(), "agora.yaml")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	g := rt48bResident(t, cfgFile, cfg)
	const n = 100
	var bodies []string
	for i := range n {
		bodies = append(bodies, g.body(map[string]any{"grants": map[string]any{fmt.Sprintf("PEERTEXT-rt48b-%03d", i): 1}}))
	}
	peer, out := rt48bPeer(t, g.sock, bodies)
	peer.Wait()
	if got := strings.Count(out.String(), "RT48B STATUS 400"); got != n {
		t.Fatalf("%d of %d bad-grants requests answered 400 (the attack needs Prepare's grants error):\n%s", got, n, out)
	}
	log := g.log.String()
	lines := strings.Count(log, "\n")
	declined := strings.Count(log, `msg="hand-off declined"`)
	refused := strings.Count(log, "msg=refused")
	peerText := strings.Count(log, "PEERTEXT-rt48b-")
	t.Logf("%d requests with bad grants: %d lines in resident.log (%d 'hand-off declined', %d 'refused'), %d carrying the peer's text; declines counted: %d",
		n, lines, declined, refused, peerText, g.r.declines.total())
	if lines > 5 {
		t.Errorf("%d bad-grants requests wrote %d lines to resident.log, want a bounded few; first lines:\n%s", n, lines, firstLines(log, 6))
	}
	if peerText > 0 {
		t.Errorf("resident.log holds text the peer chose (%d lines), as the reason of a 'hand-off declined'", peerText)
	}
	if declined > 0 {
		t.Errorf("a malformed request (400, not a 409 decline) is logged as 'hand-off declined' (%d lines) and counted in declined=%d", declined, g.r.declines.total())
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, "\n")
}

// TestRedTeam48b_DeclineLogResetSaysAgain: the declineLog starts its memory over when it
// holds maxDeclineReasons reasons, even for a reason it already holds: with the map full, the
// next decline of a reason said a second ago is said again, and every known reason is then
// new again. (A stream of 64 distinct reasons needs peer text, as above; this pins the
// reset's own behaviour.)
func TestRedTeam48b_DeclineLogResetSaysAgain(t *testing.T) {
	var l declineLog
	now := time.Unix(1_800_000_000, 0)
	for i := range maxDeclineReasons {
		l.add("reason-"+strconv.Itoa(i), now)
	}
	said := 0
	for i := range 10 {
		if say, _ := l.add("reason-0", now.Add(time.Duration(i)*time.Second)); say {
			said++
		}
	}
	if said > 0 {
		t.Errorf("a reason said within the minute was said %d more times once the memory was full", said)
	}
}
