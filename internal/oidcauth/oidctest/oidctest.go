// Package oidctest starts the real OpenID Connect provider agora's OIDC tests sign in against:
// .cache/oidc/bin/agora-oidc-op, built by scripts/oidc-tools.sh from zitadel/oidc's
// certified op package. A test without it skips, saying so.
package oidctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Service is a client credentials client of the provider.
type Service struct {
	ID       string        `json:"id"`
	Secret   string        `json:"secret"`
	Groups   []string      `json:"groups"`
	Audience []string      `json:"audience"`
	TTL      time.Duration `json:"ttl"` // 0: the provider's 5 minutes; below zero: already expired
}

// Config is the provider's config.
type Config struct {
	Services    []Service           `json:"services"`
	UserGroups  map[string][]string `json:"user_groups,omitempty"` // example user id (id1, id2) -> groups
	WebClientID string              `json:"web_client_id,omitempty"`
	WebSecret   string              `json:"web_secret,omitempty"`
	RedirectURI []string            `json:"redirect_uris,omitempty"`
}

// Provider is a running provider.
type Provider struct {
	Issuer string
	cfg    Config
}

// Start runs a provider for the test's lifetime.
func Start(t testing.TB, cfg Config) *Provider {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Skip("SKIP: " + err.Error())
	}
	cfgFile := filepath.Join(t.TempDir(), "op.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-config", cfgFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "ISSUER ")
	if err != nil || !ok {
		t.Fatalf("the provider said %q (%v), not ISSUER <url>", line, err)
	}
	go io.Copy(io.Discard, out)
	return &Provider{Issuer: issuer, cfg: cfg}
}

// Token obtains an access token for service id with the client credentials grant.
func (p *Provider) Token(t testing.TB, id string) string {
	t.Helper()
	tok, err := p.TokenErr(id)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TokenErr is Token returning its error.
func (p *Provider) TokenErr(id string) (string, error) {
	var secret string
	for _, s := range p.cfg.Services {
		if s.ID == id {
			secret = s.Secret
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	req, _ := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &body) != nil || body.AccessToken == "" {
		return "", fmt.Errorf("client credentials for %s: %s %s", id, resp.Status, raw)
	}
	return body.AccessToken, nil
}

// Rotate makes a new signing key current; drop also unpublishes every older key.
func (p *Provider) Rotate(t testing.TB, drop bool) {
	t.Helper()
	u := p.Issuer + "/admin/rotate"
	if drop {
		u += "?drop=1"
	}
	resp, err := http.Post(u, "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate: %v %v", err, resp)
	}
	resp.Body.Close()
}

func binary() (string, error) {
	if b := os.Getenv("AGORA_OIDC_OP"); b != "" {
		return b, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			b := filepath.Join(dir, ".cache", "oidc", "bin", "agora-oidc-op")
			if _, err := os.Stat(b); err != nil {
				return "", fmt.Errorf("no OIDC provider at %s: run scripts/oidc-tools.sh", b)
			}
			return b, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// The provider's example users (zitadel/oidc's example storage), with their password.
const (
	User1    = "id1" // signs in as test-user@127.0.0.1
	User2    = "id2" // signs in as test-user2
	Password = "verysecure"
)

// Username is the login name of the example user id.
func Username(id string) string {
	if id == User1 {
		return "test-user@127.0.0.1"
	}
	return "test-user2"
}

// SignIn is a browser signing in at the provider: c (with its cookie jar, if any) follows
// start (the web view's /oidc/login, or an authorization URL) to the provider's login page,
// posts user's name and password there, and returns the URL the provider then sends the
// browser to (the redirect URI with code and state) without following it.
func (p *Provider) SignIn(c *http.Client, start, user string) (string, error) {
	op, err := url.Parse(p.Issuer)
	if err != nil {
		return "", err
	}
	cc := *c
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != op.Host || len(via) > 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := cc.Get(start)
	if err != nil {
		return "", err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Host != op.Host || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("sign-in did not reach the provider's login page: %s at %s: %s", resp.Status, resp.Request.URL, page)
	}
	_, rest, ok := strings.Cut(string(page), `name="id" value="`)
	id, _, _ := strings.Cut(rest, `"`)
	if !ok || id == "" {
		return "", fmt.Errorf("no auth request id on the provider's login page: %s", page)
	}
	resp, err = cc.PostForm(p.Issuer+"/login/username", url.Values{"id": {id}, "username": {Username(user)}, "password": {Password}})
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode/100 != 3 || loc == "" {
		return "", fmt.Errorf("the provider did not send the browser back: %s: %s", resp.Status, body)
	}
	return loc, nil
}

// Exchange is a client trading code at the token endpoint itself (form-encoded, the secret
// in Basic), with verifier unless it is empty; it returns the status and the answer.
func (p *Provider) Exchange(clientID, secret, redirectURI, code, verifier string) (int, []byte, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	req, _ := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.SetBasicAuth(clientID, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
