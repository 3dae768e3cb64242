package httpauth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/httpauth"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// factory is a factory over env alone, with AGORA_HOME an empty directory (no auth.oidc).
func factory(t *testing.T, env map[string]string) *cmdutil.Factory {
	t.Helper()
	home := t.TempDir()
	return &cmdutil.Factory{Getenv: func(k string) string {
		if k == "AGORA_HOME" {
			return home
		}
		return env[k]
	}}
}

// TestConfig_Refusals: every way a hostile or careless operator can start an HTTP server
// agora mcp --http and agora orch serve --http share is refused before anything binds, and
// no refusal prints the token it was given.
func TestConfig_Refusals(t *testing.T) {
	good := strings.Repeat("7f", 32)
	short := "0123456789abcdef0123456789abcde" // 31 characters
	long := strings.Repeat("x", 513)
	dir := t.TempDir()
	open := filepath.Join(dir, "open.yaml")
	if err := os.WriteFile(open, []byte("- {name: a, token: "+good+", ceiling: read}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		addr  string
		token string
		env   map[string]string
		want  error  // errors.Is, when set
		text  string // in the error, when set
	}{
		{name: "no token", addr: "127.0.0.1:0", want: mcpserver.ErrNoToken},
		{name: "empty token is no token", addr: "127.0.0.1:0", token: "", want: mcpserver.ErrNoToken},
		{name: "short token", addr: "127.0.0.1:0", token: short, want: mcpserver.ErrWeakToken},
		{name: "over-long token", addr: "127.0.0.1:0", token: long, want: mcpserver.ErrWeakToken},
		{name: "token with a space", addr: "127.0.0.1:0", token: good + " x", want: mcpserver.ErrWeakToken},
		{name: "token with a newline", addr: "127.0.0.1:0", token: good + "\nx", want: mcpserver.ErrWeakToken},
		{name: "every interface", addr: "0.0.0.0:0", token: good, want: mcpserver.ErrExposedBind},
		{name: "empty host", addr: ":0", token: good, want: mcpserver.ErrExposedBind},
		{name: "another loopback spelling", addr: "127.0.0.2:0", token: good, want: mcpserver.ErrExposedBind},
		{name: "IPv6 every interface", addr: "[::]:0", token: good, want: mcpserver.ErrExposedBind},
		{name: "a name that resolves to loopback elsewhere", addr: "localhost.evil.example:0", token: good, want: mcpserver.ErrExposedBind},
		{name: "opt-in not the literal", addr: "0.0.0.0:0", token: good, env: map[string]string{httpauth.EnvAllowAny: "yes"}, text: "must be exactly " + mcpserver.AllowAnyValue},
		{name: "opt-in with a trailing space", addr: "0.0.0.0:0", token: good, env: map[string]string{httpauth.EnvAllowAny: mcpserver.AllowAnyValue + " "}, text: "must be exactly"},
		{name: "both token variables", addr: "127.0.0.1:0", token: good, env: map[string]string{httpauth.EnvTokensFile: open}, text: "use one"},
		{name: "tokens file others can read", addr: "127.0.0.1:0", env: map[string]string{httpauth.EnvTokensFile: open}, text: "readable or writable by others"},
		{name: "tokens file missing", addr: "127.0.0.1:0", env: map[string]string{httpauth.EnvTokensFile: filepath.Join(dir, "absent.yaml")}, want: os.ErrNotExist},
		{name: "no port", addr: "127.0.0.1", token: good, text: "want HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "mcp"}
			cmd.Flags().String("ceiling", "orchestrate", "")
			_, err := httpauth.Config(cmd, factory(t, tt.env), httpauth.Options{Addr: tt.addr}, tt.token, mcpserver.CeilingOrchestrate)
			if err == nil {
				t.Fatalf("Config(%s) started, want a refusal", tt.addr)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Config = %v, want %v", err, tt.want)
			}
			if tt.text != "" && !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Config = %v, want it to say %q", err, tt.text)
			}
			var ue *cmdutil.UsageError
			if !errors.As(err, &ue) {
				t.Errorf("Config = %T, want a usage error (exit 2)", err)
			}
			msg := err.Error()
			var h interface{ Hint() string }
			if errors.As(err, &h) {
				msg += h.Hint()
			}
			for _, tok := range []string{good, short, long[:64]} {
				if tok != "" && strings.Contains(msg, tok) {
					t.Errorf("the refusal prints a token: %s", msg)
				}
			}
		})
	}
}

// TestConfig_Accepts: what the refusals leave open, with the client and ceiling given.
func TestConfig_Accepts(t *testing.T) {
	good := strings.Repeat("7f", 32)
	for _, tt := range []struct {
		addr string
		env  map[string]string
		any  bool
	}{
		{addr: "127.0.0.1:0"},
		{addr: "[::1]:0"},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:0", env: map[string]string{httpauth.EnvAllowAny: mcpserver.AllowAnyValue}, any: true},
	} {
		cfg, err := httpauth.Config(&cobra.Command{}, factory(t, tt.env), httpauth.Options{Addr: tt.addr, AllowHosts: []string{"agora.internal"}}, good, mcpserver.CeilingRead)
		if err != nil {
			t.Fatalf("Config(%s) = %v", tt.addr, err)
		}
		if len(cfg.Clients) != 1 || cfg.Clients[0].Token != good || cfg.Clients[0].Ceiling != mcpserver.CeilingRead || cfg.Clients[0].Name != mcpserver.DefaultClientName {
			t.Errorf("Config(%s) clients %v, want the one default client at read", tt.addr, cfg.Clients)
		}
		if cfg.AllowAny != tt.any || cfg.Addr != tt.addr || len(cfg.AllowHosts) != 1 || cfg.OIDC != nil {
			t.Errorf("Config(%s) = addr %s, allow any %v, hosts %v, oidc %v", tt.addr, cfg.Addr, cfg.AllowAny, cfg.AllowHosts, cfg.OIDC != nil)
		}
	}
}

// TestConfig_CeilingWithTokensFile: --ceiling names AGORA_HTTP_TOKEN's one client; given beside
// a tokens file it would be silently ignored, so it is refused.
func TestConfig_CeilingWithTokensFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte("- {name: a, token: "+strings.Repeat("7f", 32)+", ceiling: read}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{Use: "mcp"}
	cmd.Flags().String("ceiling", "orchestrate", "")
	if err := cmd.Flags().Set("ceiling", "orchestrate"); err != nil {
		t.Fatal(err)
	}
	f := factory(t, map[string]string{httpauth.EnvTokensFile: file})
	if _, err := httpauth.Config(cmd, f, httpauth.Options{Addr: "127.0.0.1:0"}, "", mcpserver.CeilingOrchestrate); err == nil || !strings.Contains(err.Error(), "--ceiling does not apply") {
		t.Fatalf("Config = %v, want --ceiling refused beside %s", err, httpauth.EnvTokensFile)
	}
	cmd = &cobra.Command{Use: "mcp"}
	cfg, err := httpauth.Config(cmd, f, httpauth.Options{Addr: "127.0.0.1:0"}, "", mcpserver.CeilingOrchestrate)
	if err != nil || len(cfg.Clients) != 1 || cfg.Clients[0].Ceiling != mcpserver.CeilingRead {
		t.Fatalf("Config = %v, %v; want the file's one client at its own ceiling, read", cfg.Clients, err)
	}
}

// TestTakeToken: the token leaves the process's environment when read, so no child inherits it.
func TestTakeToken(t *testing.T) {
	tok := strings.Repeat("ab", 32)
	t.Setenv(httpauth.EnvToken, tok)
	if got := httpauth.TakeToken(&cmdutil.Factory{Getenv: os.Getenv}); got != tok {
		t.Fatalf("TakeToken = %q, want the token", got)
	}
	if v, ok := os.LookupEnv(httpauth.EnvToken); ok {
		t.Fatalf("%s is still set (%d characters) after TakeToken", httpauth.EnvToken, len(v))
	}
}
