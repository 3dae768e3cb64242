// Package httpauth is who may use agora's HTTP servers and from where: the clients' tokens
// (AGORA_HTTP_TOKEN, AGORA_HTTP_TOKENS_FILE), operators from agora.yaml's auth.oidc, the hosts
// allowed and the bind, checked before anything is opened: no token, no bind. agora mcp --http
// and agora orch serve --http (the web run view) read the same variables by the same rules.
package httpauth

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/tracing"
)

// Environment the HTTP transports read. Only [Config] and [TakeToken] read them, once, before
// anything starts; the token is then removed from the process's environment so no child
// inherits it.
const (
	EnvToken      = "AGORA_HTTP_TOKEN"
	EnvTokensFile = "AGORA_HTTP_TOKENS_FILE"
	EnvAllowAny   = "AGORA_HTTP_ALLOW_ANY"
	maxTokensFile = 1 << 20
)

// TakeToken returns AGORA_HTTP_TOKEN and removes it from the process's environment: whatever
// happens next, no process this one starts inherits it.
func TakeToken(f *cmdutil.Factory) string {
	token := f.Getenv(EnvToken)
	os.Unsetenv(EnvToken)
	return token
}

// Options are the flags of a command that serves HTTP.
type Options struct {
	Addr       string
	AllowHosts []string
	Rate       float64
	Burst      int
}

// setupError is a refusal to start, with the setting that fixes it.
type setupError struct {
	err  error
	hint string
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }
func (e *setupError) Hint() string  { return e.hint }

func refusal(cmd *cobra.Command, err error, hint string) error {
	return &cmdutil.UsageError{Err: &setupError{err: err, hint: hint}, Cmd: cmd}
}

// Config gathers the HTTP transport's clients and address and checks them before
// anything is opened: no token, no bind.
func Config(cmd *cobra.Command, f *cmdutil.Factory, opts Options, token string, ceiling mcpserver.Ceiling) (mcpserver.HTTPConfig, error) {
	cfg := mcpserver.HTTPConfig{Addr: opts.Addr, AllowHosts: opts.AllowHosts,
		Limits: mcpserver.Limits{Rate: opts.Rate, Burst: opts.Burst},
		// A client's traceparent header: the dispatches and runs its calls start join its trace.
		Wrap: tracing.Extract}
	file := f.Getenv(EnvTokensFile)
	switch {
	case token != "" && file != "":
		return cfg, cmdutil.UsageErrorf(cmd, "both %s and %s are set; use one", EnvToken, EnvTokensFile)
	case token != "":
		if err := mcpserver.CheckToken(token); err != nil {
			return cfg, refusal(cmd, fmt.Errorf("%s: %w", EnvToken, err), "generate one with: openssl rand -hex 32")
		}
		cfg.Clients = []mcpserver.Client{{Name: mcpserver.DefaultClientName, Token: token, Ceiling: ceiling}}
	case file != "":
		if cmd.Flags().Changed("ceiling") {
			return cfg, cmdutil.UsageErrorf(cmd, "--ceiling does not apply with %s: each client there has its own ceiling", EnvTokensFile)
		}
		src, err := readTokensFile(file)
		if err != nil {
			return cfg, refusal(cmd, err, "the file must be yours alone: chmod 600 "+file)
		}
		if cfg.Clients, err = mcpserver.ParseClients(file, src); err != nil {
			return cfg, refusal(cmd, err, "each entry needs name, token (at least 32 characters) and ceiling (read, dispatch or orchestrate)")
		}
	}
	// Operators from an OpenID Connect provider: agora.yaml's auth.oidc. Beside static
	// tokens, or alone. Nothing is fetched from the provider before the first token.
	if v, err := oidcVerifier(f); err != nil {
		return cfg, refusal(cmd, err, "fix auth.oidc in agora.yaml (docs/operations.md, \"Operators from an identity provider\")")
	} else if v != nil {
		cfg.OIDC, cfg.Resource = v, v.Config().Resource
	}
	if len(cfg.Clients) == 0 && cfg.OIDC == nil {
		return cfg, refusal(cmd, mcpserver.ErrNoToken, "set "+EnvToken+"=$(openssl rand -hex 32), configure auth.oidc in agora.yaml, or serve stdio without --http")
	}
	switch v := f.Getenv(EnvAllowAny); v {
	case "":
	case mcpserver.AllowAnyValue:
		cfg.AllowAny = true
	default:
		return cfg, cmdutil.UsageErrorf(cmd, "%s must be exactly %s, or unset", EnvAllowAny, mcpserver.AllowAnyValue)
	}
	if err := mcpserver.CheckBind(cfg.Addr, cfg.AllowAny); err != nil {
		return cfg, refusal(cmd, err, "bind 127.0.0.1 and put a TLS-terminating proxy in front to serve other hosts")
	}
	if err := mcpserver.CheckHTTP(cfg); err != nil {
		return cfg, refusal(cmd, err, "give every client its own token of at least 32 characters")
	}
	return cfg, nil
}

// oidcVerifier returns the verifier of agora.yaml's auth.oidc, or nil when it is absent.
func oidcVerifier(f *cmdutil.Factory) (*oidcauth.Verifier, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	c, err := config.Load(dir)
	if err != nil || !c.Auth.OIDC.Enabled() {
		return nil, err
	}
	return oidcauth.New(c.Auth.OIDC, oidcauth.Options{})
}

// readTokensFile reads the tokens file, refusing one that others can read.
func readTokensFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvTokensFile, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is readable or writable by others (mode %04o)", EnvTokensFile, path, st.Mode().Perm())
	}
	return cmdutil.ReadLimited(path, maxTokensFile)
}
