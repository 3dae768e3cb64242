package doctor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// TestRun_Runtimes: each host runtime is listed with its binary and version, or as missing
// with the install command; a configured path is handed to the resolver; none blocks
// dispatching.
func TestRun_Runtimes(t *testing.T) {
	h := healthyRoot(nil)
	got := map[string]string{}
	h.RuntimeBinary = func(ctx context.Context, rt, configured string) (runtimebin.Binary, error) {
		got[rt] = configured
		if rt == "codex" {
			return runtimebin.Binary{}, &runtimebin.NotFoundError{Runtime: rt, PATH: "/usr/bin", Err: os.ErrNotExist}
		}
		return runtimebin.Binary{Runtime: rt, Path: "/opt/claude/claude", Version: "2.1.330 (Claude Code)", SHA256: strings.Repeat("b", 64)}, nil
	}
	c := config.Default(t.TempDir())
	c.Runtimes = map[string]config.Runtime{"claude-code": {Binary: "/usr/local/bin/claude"}}
	r := Run(t.Context(), h, Options{Config: c})
	if got["claude-code"] != "/usr/local/bin/claude" || got["codex"] != "" {
		t.Errorf("resolver got configured paths %v", got)
	}
	cc := check(t, r, "runtime-claude-code")
	if cc.Status != StatusOK || !strings.Contains(cc.Detail, "/opt/claude/claude, 2.1.330 (Claude Code)") || !strings.Contains(cc.Detail, "/agora/runtime/bin/claude") {
		t.Errorf("claude-code check = %+v", cc)
	}
	cx := check(t, r, "runtime-codex")
	if cx.Status != StatusMissing || cx.Fix != "npm install -g @openai/codex" || cx.Required {
		t.Errorf("codex check = %+v, want missing, not required, fixed by npm install -g @openai/codex", cx)
	}
	if !r.CanDispatch {
		t.Error("a missing agent CLI blocked every dispatch")
	}

	// A binary that is there but unusable says why, and how to get a usable one.
	h.RuntimeBinary = func(context.Context, string, string) (runtimebin.Binary, error) {
		return runtimebin.Binary{}, errors.New("claude-code runtime: /x needs the interpreter /nix/ld.so, which the sandbox does not bind")
	}
	r = Run(t.Context(), h, Options{Config: c})
	if cc := check(t, r, "runtime-claude-code"); cc.Status != StatusMissing || !strings.Contains(cc.Detail, "/nix/ld.so") || !strings.Contains(cc.Fix, "runtimes.claude-code.binary") {
		t.Errorf("unusable binary check = %+v", cc)
	}
}
