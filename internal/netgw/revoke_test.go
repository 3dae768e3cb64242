package netgw

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestTunnel_IdleTunnelsDoNotReadTheSession: every
// open tunnel read and parsed its session.json every second, so a gateway holding thousands
// of idle tunnels read thousands of files a second for nothing. Counted by the kernel
// (inotify's IN_OPEN on the session directory): 32 idle tunnels over three looks of their
// session's watcher (a look a second) open it at most once or twice, and a revocation still
// closes them all.
func TestTunnel_IdleTunnelsDoNotReadTheSession(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01IDLEREADS")
	s := g.export(t, l)
	c := g.client(t, l.id, s.Token)
	var tunnels []net.Conn
	for range 32 {
		conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
		must(t, err)
		defer conn.Close()
		tunnels = append(tunnels, conn)
	}
	opens := countOpens(t, filepath.Join(g.reg.Dir, l.id), sessionFile)
	waitLooks(t, 3)
	if n := opens.Load(); n > 2 {
		t.Errorf("32 idle tunnels opened session.json %d times over three looks; want at most 2 (it did not change)", n)
	}
	t.Logf("session.json opened %d times over three looks with 32 idle tunnels", opens.Load())
	must(t, s.Close())
	for i, conn := range tunnels {
		if err := closedByPeer(conn); err != nil {
			t.Fatalf("tunnel %d after the revocation: %v", i, err)
		}
	}
}

// TestTunnel_ReexportClosesOldTunnels: a re-export (a new token, the same dispatch) ends the
// old token's tunnels, and the new token's stay.
func TestTunnel_ReexportClosesOldTunnels(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01REEXPORTTUNNEL")
	old := g.export(t, l)
	conn, err := g.client(t, l.id, old.Token).DialTunnel(t.Context(), "gateway", "echo.sock")
	must(t, err)
	defer conn.Close()
	fresh := g.export(t, l)
	if err := closedByPeer(conn); err != nil {
		t.Fatalf("the old token's tunnel after a re-export: %v", err)
	}
	conn2, err := g.client(t, l.id, fresh.Token).DialTunnel(t.Context(), "gateway", "echo.sock")
	must(t, err)
	defer conn2.Close()
	waitLooks(t, 2) // the new session's watcher looked, and it stands
	if _, err := conn2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	conn2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn2, buf); err != nil {
		t.Errorf("the new token's tunnel: %v, want it open", err)
	}
}

// waitLooks waits for the next n looks of the sessions' watchers.
func waitLooks(t *testing.T, n int) {
	t.Helper()
	looked := make(chan struct{}, 1)
	f := func() {
		select {
		case looked <- struct{}{}:
		default:
		}
	}
	testOnlyLooked.Store(&f)
	defer testOnlyLooked.Store(nil)
	for i := range n {
		select {
		case <-looked:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d looks of the session watchers", i, n)
		}
	}
}

// countOpens counts, until the test ends, the opens of dir/name the kernel reports.
func countOpens(t *testing.T, dir, name string) *atomic.Int64 {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	must(t, err)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a pending Read
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			k, err := f.Read(buf)
			if err != nil {
				return
			}
			// struct inotify_event: wd, mask, cookie, len (4 bytes each), then len bytes of name.
			for off := 0; off+unix.SizeofInotifyEvent <= k; {
				l := int(binary.NativeEndian.Uint32(buf[off+12:]))
				ev := buf[off+unix.SizeofInotifyEvent : min(k, off+unix.SizeofInotifyEvent+l)]
				if string(bytes.TrimRight(ev, "\x00")) == name {
					n.Add(1)
				}
				off += unix.SizeofInotifyEvent + l
			}
		}
	}()
	t.Cleanup(func() {
		f.Close()
		<-done
	})
	return &n
}

// TestRegistry_RevokeWithoutTheExporter: Revoke ends a session whose exporter is gone (the
// reaper's case): its routes answer 401 and its open tunnels close; revoking again, or a
// dispatch without a session, is no error.
func TestRegistry_RevokeWithoutTheExporter(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01REVOKEREAP")
	s := g.export(t, l)
	conn, err := g.client(t, l.id, s.Token).DialTunnel(t.Context(), "gateway", "echo.sock")
	must(t, err)
	defer conn.Close()
	reaper := &Registry{Dir: g.reg.Dir} // another process, over the same directory
	must(t, reaper.Revoke(t.Context(), l.id))
	if err := closedByPeer(conn); err != nil {
		t.Errorf("the tunnel after Revoke: %v", err)
	}
	for _, route := range []string{"/session", "/mounts/workspace"} {
		if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+route, s.Token, nil); code != 401 {
			t.Errorf("GET %s after Revoke: %d, want 401", route, code)
		}
	}
	must(t, reaper.Revoke(t.Context(), l.id))
	must(t, reaper.Revoke(t.Context(), "01NEVEREXPORTED"))
	if err := reaper.Revoke(t.Context(), "../escape"); err == nil {
		t.Error("Revoke of an invalid id succeeded")
	}
}
