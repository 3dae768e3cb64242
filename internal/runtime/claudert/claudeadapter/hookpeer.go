package claudeadapter

import (
	"net"
	"os"

	"github.com/agora-dev/agora/internal/peercred"
)

// samePeer accepts only connections from processes of the worker's own user in the
// worker's own PID namespace, and closes every other one unread. The relay's socket is
// abstract, and abstract names live in a network namespace: with `network: host` that is
// the host's, where any process (another user, another sandbox, another tenant) could
// otherwise report calls into this dispatch's audit. A peer in another PID namespace shows
// pid 0 in SO_PEERCRED; one of another user shows its uid.
type samePeer struct{ net.Listener }

func (l samePeer) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if peerIsOurs(c) {
			return c, nil
		}
		c.Close()
	}
}

// peerIsOurs reports whether c's peer is a process of our uid in our PID namespace.
func peerIsOurs(c net.Conn) bool {
	cred, err := peercred.Of(c)
	return err == nil && cred.Pid != 0 && cred.Uid == uint32(os.Getuid())
}
