package orch

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/web"
)

// envOIDCClientSecret holds the web view's client secret at the identity provider when
// auth.oidc.web.client_secret_file does not name a file.
const envOIDCClientSecret = "AGORA_OIDC_CLIENT_SECRET"

// maxSecretBytes bounds a client secret file.
const maxSecretBytes = 4 << 10

// takeOIDCSecret returns AGORA_OIDC_CLIENT_SECRET and removes it from the process's
// environment, as [httpauth.TakeToken] does the token: every process serve starts (a
// dispatch's detached supervisor) inherits that environment, and none needs the secret.
func takeOIDCSecret(f *cmdutil.Factory) string {
	secret := f.Getenv(envOIDCClientSecret)
	os.Unsetenv(envOIDCClientSecret)
	return secret
}

// webOIDC returns the web view's sign-in of agora.yaml's auth.oidc.web, or nil when it is
// absent. The client secret is read from its file (refused when others can read it) or else
// is envSecret (AGORA_OIDC_CLIENT_SECRET, taken by [takeOIDCSecret]), never from agora.yaml
// or argv.
func webOIDC(f *cmdutil.Factory, envSecret string) (*web.OIDC, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	c, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	if !c.Auth.OIDC.Enabled() || !c.Auth.OIDC.Web.Enabled() {
		return nil, nil
	}
	secret, err := webOIDCSecret(envSecret, c.Auth.OIDC.Web)
	if err != nil {
		return nil, err
	}
	v, err := oidcauth.NewWeb(c.Auth.OIDC, oidcauth.Options{})
	if err != nil {
		return nil, err
	}
	return &web.OIDC{Verifier: v, Secret: secret}, nil
}

func webOIDCSecret(envSecret string, w oidcauth.WebClient) (string, error) {
	if w.ClientSecretFile == "" {
		return envSecret, nil
	}
	// One open, then checks on what was opened: a file swapped between a stat and a read is
	// not read, and a FIFO named there is refused instead of hanging start-up (O_NONBLOCK).
	fd, err := os.OpenFile(w.ClientSecretFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file %s is not a regular file", w.ClientSecretFile)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file %s is readable by others (mode %v): chmod 600 it", w.ClientSecretFile, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(fd, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file: %w", err)
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file %s: over %d bytes", w.ClientSecretFile, maxSecretBytes)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("auth.oidc.web.client_secret_file %s is empty", w.ClientSecretFile)
	}
	return s, nil
}
