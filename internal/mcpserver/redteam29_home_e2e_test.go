package mcpserver_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedTeam29_StdioAnyWrongHomeIsShown (surfaces 4 and 5): a
// home that exists but cannot be served is as wrong as a missing one, and a client must see
// why, not "Connection closed": AGORA_HOME naming a regular file, a path through a file, and
// an initialised home whose agora.yaml does not load. The server starts, its instructions and
// every tool call's error name the home and what is wrong, nothing is written, and it exits
// non-zero when the client goes.
func TestRedTeam29_StdioAnyWrongHomeIsShown(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badConfig := newHome(t)
	if err := os.WriteFile(filepath.Join(badConfig, "agora.yaml"), []byte("bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, home, want string }{
		{"a file", file, "not a directory"},
		{"through a file", filepath.Join(file, "home"), "not a directory"},
		{"a bad agora.yaml", badConfig, `unknown field "bogus"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(agoraBin, "mcp", "--ceiling", "read")
			cmd.Env = baseEnv(tt.home)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cs, err := newClient().Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v (the client would show only this)\n%s", err, stderr.String())
			}
			if inst := cs.InitializeResult().Instructions; !strings.Contains(inst, tt.home) || !strings.Contains(inst, tt.want) {
				t.Errorf("instructions %q, want the home %s and %q", inst, tt.home, tt.want)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agora_envs_list", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(res); !res.IsError || !strings.Contains(got, tt.home) || !strings.Contains(got, tt.want) {
				t.Errorf("a tool call answered (error %v) %q, want the home and %q", res.IsError, got, tt.want)
			}
			cs.Close()
			if st := cmd.ProcessState; st == nil || st.ExitCode() == 0 {
				t.Errorf("agora mcp exited %v, want a failure", st)
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != "keep\n" {
				t.Errorf("the file AGORA_HOME named was changed: %q %v", b, err)
			}
		})
	}
}
