package mcpserver_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestStdio_ActorIsClientAtUser connects clients that name themselves in initialize to the
// real binary over stdio and reads the audit log: each call is recorded as CLIENT@USER, a
// name that tries to pass for another user or carries control bytes is flattened, none at
// all is unnamed-client, and --actor replaces the whole name (failed before:
// every stdio client was recorded as the bare OS user, "root").
func TestStdio_ActorIsClientAtUser(t *testing.T) {
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Skipf("SKIP: cannot tell the OS user: %v", err)
	}
	user := strings.TrimSpace(string(out))
	home := newHome(t)
	cases := []struct {
		client string
		args   []string
		want   string
	}{
		{"claude-code", nil, "claude-code@" + user},
		{"mallory@alice\n", nil, "mallory-alice-@" + user},
		{"", nil, "unnamed-client@" + user},
		{"claude-code", []string{"--actor", "lead-1"}, "lead-1"},
	}
	for _, c := range cases {
		cmd := exec.Command(agoraBin, append(append([]string{}, c.args...), "mcp")...)
		cmd.Env = baseEnv(home)
		cl := mcp.NewClient(&mcp.Implementation{Name: c.client, Version: "v0"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		call(t, cs, "agora_envs_list", nil)
		cs.Close()
		var got []string
		for _, e := range auditEntries(t, home) {
			got = append(got, e.Actor)
		}
		if len(got) == 0 || got[len(got)-1] != c.want {
			t.Errorf("client %q %v recorded as %q; want %q", c.client, c.args, got, c.want)
		}
	}
}

// FuzzCleanClientName: whatever a client calls itself, the recorded part is 1 to 64 bytes of
// [A-Za-z0-9._-], holds no '@' (so it cannot pass for another user), and is never empty.
func FuzzCleanClientName(f *testing.F) {
	for _, s := range []string{"claude-code", "", "a@b", "..", "\x00\xff", strings.Repeat("é", 80)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := mcpserver.CleanClientNameForTest(name)
		if got == "" || len(got) > 64 {
			t.Fatalf("%q -> %q: length %d", name, got, len(got))
		}
		for i := 0; i < len(got); i++ {
			c := got[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				t.Fatalf("%q -> %q holds %q", name, got, c)
			}
		}
	})
}
