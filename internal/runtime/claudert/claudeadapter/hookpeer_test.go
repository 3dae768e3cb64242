package claudeadapter

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// TestHookRelay_RefusesOtherUsers: with `network: host` the relay's abstract name is in the
// host's network namespace, listed in /proc/net/unix; a process of another user (another
// sandbox's uid, another tenant) must not get a report through.
func TestHookRelay_RefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: connecting as another user needs root")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: python3 is needed to connect as another user")
	}
	a := &memAuditor{}
	gw := agentrun.DialGateway(startGateway(t, a))
	t.Cleanup(gw.Close)
	hooks, err := startHookRelay(gw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hooks.close)
	body := `{"tool":"Bash","decision":"requested","reason":"r","args_hash":"sha256:` + strings.Repeat("0", 64) + `","duration_ms":0,"phase":"pre","call_id":"forged"}`
	script := `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("\0" + sys.argv[1][1:])
b = sys.argv[2].encode()
s.sendall(b"POST /audit/tool HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(b) + b)
print(s.recv(100).split(b"\r\n")[0].decode() or "closed")
`
	run := func(uid uint32) string {
		cmd := exec.Command(py, "-c", script, hooks.name, body)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if got := run(65534); strings.Contains(got, "HTTP/1.1 2") {
		t.Fatalf("a process of another user got a report through: %s", got)
	}
	if _, ok := hooks.record("forged"); ok {
		t.Fatal("the relay kept another user's report")
	}
	// Our own uid still gets through (the check is not refusing everything).
	if got := run(uint32(os.Getuid())); !strings.Contains(got, "HTTP/1.1 204") {
		t.Fatalf("our own process was refused: %s", got)
	}
}
