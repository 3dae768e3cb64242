package service_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/service"
)

// TestListen_NeverSeenOpen: under the widest umask, a watcher that looks at the socket's path
// the whole time Listen runs never sees a socket there with any mode but 0600 (the CLI trusts
// no other, and a CLI that came while it had the umask's would run its dispatch
// itself). Each Listen replaces the last one's socket, which its listener left behind, and the
// new listener is the one that accepts there; nothing else is left in the directory.
func TestListen_NeverSeenOpen(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o700))
	path := filepath.Join(dir, "orch.sock")
	var stop atomic.Bool
	var looks, sockets, open atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			looks.Add(1)
			fi, err := os.Lstat(path)
			if err != nil || fi.Mode().Type() != os.ModeSocket {
				continue
			}
			sockets.Add(1)
			if fi.Mode().Perm() != 0o600 {
				open.Add(1)
			}
		}
	}()
	const rounds = 300
	for i := range rounds {
		ln, err := service.Listen(path)
		if err != nil {
			stop.Store(true)
			<-done
			t.Fatalf("round %d: %v", i, err)
		}
		// The socket at path is this listener's: a dial there is accepted by it.
		if err := acceptsAt(ln, path); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		ln.Close() // leaves the socket file: the next round's Listen replaces it
	}
	stop.Store(true)
	<-done
	t.Logf("%d looks, %d saw a socket", looks.Load(), sockets.Load())
	if sockets.Load() == 0 {
		t.Fatalf("the watcher never saw the socket in %d looks: it looked at nothing", looks.Load())
	}
	if n := open.Load(); n > 0 {
		t.Errorf("the watcher saw the socket with a mode other than 0600 %d times", n)
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "orch.sock" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only orch.sock", names)
	}
}

// TestListen_RefusesWhatIsNotASocket: Listen never puts its socket where a directory is, and
// leaves nothing behind when it cannot.
func TestListen_RefusesWhatIsNotASocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orch.sock")
	must(t, os.MkdirAll(filepath.Join(path, "inside"), 0o700))
	if ln, err := service.Listen(path); err == nil {
		ln.Close()
		t.Fatal("Listen over a directory succeeded")
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 1 {
		t.Errorf("a failed Listen left %d entries in the directory, want 1 (the directory)", len(ents))
	}
}

// acceptsAt dials path and says whether ln, and not another listener, accepted the
// connection.
func acceptsAt(ln net.Listener, path string) error {
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		ln.Close() // ends the Accept
		<-accepted
		return fmt.Errorf("dial %s: %w", path, err)
	}
	c.Close()
	select {
	case err := <-accepted:
		if err != nil {
			return fmt.Errorf("the listener did not accept: %w", err)
		}
		return nil
	case <-time.After(10 * time.Second):
		ln.Close()
		<-accepted
		return fmt.Errorf("a dial of %s was not accepted by the listener within 10s: another one has the path", path)
	}
}
