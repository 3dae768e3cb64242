package remote

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// listen serves the host socket sock of mount m at path: every connection is tunnelled to
// the host's socket of that name.
func (w *Worker) listen(m, sock, path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("serve host socket %s: %w", sock, err)
	}
	w.lns = append(w.lns, ln)
	w.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case w.slots <- struct{}{}:
			default:
				c.Close() // too many at once: the client sees a reset and may retry
				continue
			}
			w.track(c, true)
			w.wg.Go(func() {
				defer func() { <-w.slots }()
				defer w.track(c, false)
				defer c.Close()
				// Across a gateway's restart the agent's connection waits for the tunnel.
				up, err := w.c.DialTunnel(w.ctx, m, sock)
				if err != nil {
					return
				}
				w.track(up, true)
				defer w.track(up, false)
				defer up.Close()
				pipe(c.(*net.UnixConn), up)
			})
		}
	})
	return nil
}

func (w *Worker) track(c net.Conn, add bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if add {
		w.conns[c] = struct{}{}
	} else {
		delete(w.conns, c)
	}
}

// closeTunnels stops listening and ends every tunnel, and every tunnel's retry.
func (w *Worker) closeTunnels() {
	w.cancel()
	for _, ln := range w.lns {
		ln.Close()
	}
	w.mu.Lock()
	for c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// pipe copies both ways, passing each direction's end on as a half close.
func pipe(local *net.UnixConn, up net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, local)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	})
	io.Copy(local, up)
	local.CloseWrite()
	wg.Wait()
}
