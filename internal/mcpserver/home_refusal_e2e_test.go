package mcpserver_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdio_MissingHomeIsShownToTheClient: a client configured with a wrong
// AGORA_HOME used to see only "Connection closed", the hint going to stderr where Claude Code
// and the Inspector keep it out of sight. The server now starts, says what is wrong in its
// instructions, lists the tools of its ceiling and answers every call with the error and the
// fix, and creates nothing. When the client goes, it exits 2 (the home is wrong).
func TestStdio_MissingHomeIsShownToTheClient(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"mian", "does not exist"},
		{"empty", "is not initialised"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), tt.name)
			if tt.name == "empty" {
				if err := os.Mkdir(home, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(agoraBin, "mcp", "--ceiling", "dispatch")
			cmd.Env = baseEnv(home)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cs, err := newClient().Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v (the client would show only this)\n%s", err, stderr.String())
			}
			hint := "AGORA_HOME=" + home + " agora init"
			if inst := cs.InitializeResult().Instructions; !strings.Contains(inst, tt.want) || !strings.Contains(inst, hint) {
				t.Errorf("instructions %q, want the refusal (%q) and %q", inst, tt.want, hint)
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil || len(tools.Tools) == 0 {
				t.Fatalf("tools/list: %v, %d tools", err, len(tools.Tools))
			}
			for _, tool := range tools.Tools {
				if tool.Name == "agora_orchestrator_submit" {
					t.Errorf("the refusing server lists %s, above its ceiling dispatch", tool.Name)
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool.Name, Arguments: map[string]any{}})
				if err != nil {
					t.Fatalf("%s: %v", tool.Name, err)
				}
				text := ""
				if len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				if !res.IsError || !strings.Contains(text, tt.want) || !strings.Contains(text, hint) {
					t.Errorf("%s answered (error %v) %q, want the refusal and %q", tool.Name, res.IsError, text, hint)
				}
			}
			cs.Close() // closes the server's stdin and waits for it to exit
			if st := cmd.ProcessState; st == nil || st.ExitCode() != 2 {
				t.Errorf("agora mcp exited %v, want exit status 2\n%s", st, stderr.String())
			}
			if !strings.Contains(stderr.String(), hint) {
				t.Errorf("stderr does not carry the hint either:\n%s", stderr.String())
			}
			if tt.name == "mian" {
				if _, err := os.Stat(home); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("agora mcp created the missing home (%v)", err)
				}
			} else if ents, _ := os.ReadDir(home); len(ents) != 0 {
				t.Errorf("agora mcp wrote %s into an uninitialised home", ents[0].Name())
			}
		})
	}
}
