package orch

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/oidcauth"
)

// TestWebOIDC_Secret: the web view's client secret comes from a 0600 file agora.yaml names or
// from AGORA_OIDC_CLIENT_SECRET; a file others may read, an empty one, and a missing one are
// refused, naming the file and never the secret; without auth.oidc.web nothing is read.
func TestWebOIDC_Secret(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"AGORA_HOME": home}
	f := &cmdutil.Factory{Getenv: func(k string) string { return env[k] }}
	if o, err := webOIDC(f, ""); o != nil || err != nil {
		t.Fatalf("no agora.yaml: %v %v", o, err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	yaml := `auth:
  oidc:
    issuer: https://id.example
    audience: agora-mcp
    rules: [{group: platform, web: operator}]
    web: {client_id: agora-web, redirect_url: "https://agora.example/oidc/callback", client_secret_file: ` + secret + `}
`
	if err := os.WriteFile(filepath.Join(home, "agora.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const value = "s3cret-value-0123456789"
	for _, tc := range []struct {
		mode os.FileMode
		body string
		want string
	}{
		{0o644, value, "readable by others"},
		{0o600, "  \n", "is empty"},
	} {
		os.Remove(secret)
		if err := os.WriteFile(secret, []byte(tc.body), tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(secret, tc.mode)
		_, err := webOIDC(f, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), value) {
			t.Fatalf("mode %v: %v, want %q without the secret", tc.mode, err, tc.want)
		}
	}
	// A FIFO named as the secret file is refused at once, never waited on (serve's start would
	// hang), and never read.
	os.Remove(secret)
	if err := syscall.Mkfifo(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := webOIDC(f, ""); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO as the secret file: %v", err)
	}
	os.Remove(secret)
	if _, err := webOIDC(f, ""); err == nil || !strings.Contains(err.Error(), "client_secret_file") {
		t.Fatalf("a missing secret file: %v", err)
	}
	if err := os.WriteFile(secret, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := webOIDC(f, "")
	if err != nil || o.Secret != value || o.Verifier.Config().Audience != "agora-web" {
		t.Fatalf("from the file: %+v, %v", o, err)
	}
	got, err := webOIDCSecret(value, oidcauth.WebClient{ClientID: "agora-web"})
	if err != nil || got != value {
		t.Fatalf("from the environment: %q, %v", got, err)
	}
}
