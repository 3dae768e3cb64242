package oidcauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/strictjson"
)

// The web view's sign-in: the authorization code flow with PKCE (RFC 7636, S256), state
// and nonce, and the ID token validated like an access token (issuer, signature by a key the
// provider publishes, expiry) with the web client id as its audience and the nonce of the
// flow. This file is the provider side of it; internal/web keeps the flows and sessions.

// NewWeb returns the verifier of the web view's ID tokens: cfg's provider and rules, with the
// web client id as the audience. cfg.Web must be configured.
func NewWeb(cfg Config, o Options) (*Verifier, error) {
	if !cfg.Web.Enabled() {
		return nil, errors.New("auth.oidc.web.client_id is not configured")
	}
	// The configuration as written first: MCP's audience must not be the web client id,
	// which the copy below sets as its audience.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Audience, cfg.webAudience = cfg.Web.ClientID, true
	return New(cfg, o)
}

// AuthRequest is one sign-in's secrets, made fresh for each.
type AuthRequest struct {
	State, Nonce, Verifier string
}

// AuthCodeURL is where the browser is sent to sign in: the provider's authorization endpoint
// with the code flow's parameters and the S256 challenge of r.Verifier.
func (v *Verifier) AuthCodeURL(ctx context.Context, r AuthRequest) (string, error) {
	m, err := v.Discover(ctx)
	if err != nil {
		return "", err
	}
	if err := checkIssuer(m.AuthorizationEndpoint); err != nil {
		return "", fmt.Errorf("%w: authorization_endpoint: %v", ErrProvider, err)
	}
	sum := sha256.Sum256([]byte(r.Verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {v.cfg.Web.ClientID},
		"redirect_uri":          {v.cfg.Web.RedirectURL},
		"scope":                 {"openid"},
		"state":                 {r.State},
		"nonce":                 {r.Nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(m.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	return m.AuthorizationEndpoint + sep + q.Encode(), nil
}

// maxCodeBytes bounds an authorization code read from the callback's query.
const maxCodeBytes = 4 << 10

// Exchange trades the callback's code for an ID token at the provider's token endpoint
// (through egress, as every fetch of this package), sending r.Verifier, and returns the
// token's identity once [Verifier.VerifyIDToken] accepts it with r.Nonce. secret is the
// client secret ("" for a public client); it goes in the Authorization header only.
func (v *Verifier) Exchange(ctx context.Context, r AuthRequest, code, secret string) (Identity, error) {
	if code == "" || len(code) > maxCodeBytes {
		return Identity{}, fmt.Errorf("%w: the callback carries no usable code", ErrInvalid)
	}
	m, err := v.Discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	if err := checkIssuer(m.TokenEndpoint); err != nil {
		return Identity{}, fmt.Errorf("%w: token_endpoint: %v", ErrProvider, err)
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {v.cfg.Web.RedirectURL},
		"code_verifier": {r.Verifier},
		"client_id":     {v.cfg.Web.ClientID},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if secret != "" {
		// RFC 6749 §2.3.1: id and secret form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(v.cfg.Web.ClientID), url.QueryEscape(secret))
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: token endpoint: %v", ErrProvider, egress.RedactError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil || len(body) > maxDocBytes {
		return Identity{}, fmt.Errorf("%w: token endpoint: an unreadable or oversized answer", ErrProvider)
	}
	idToken, code, err := parseTokenResponse(body)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: token endpoint answered %s, not a token response: %v", ErrProvider, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		// RFC 6749 §5.2: invalid_grant is a code used already, expired, issued to another
		// client or for another PKCE challenge; the provider's own description is not repeated.
		if code != "" {
			return Identity{}, fmt.Errorf("%w: the provider refused the code: %s", ErrInvalid, clip(code))
		}
		return Identity{}, fmt.Errorf("%w: token endpoint: %s", ErrProvider, resp.Status)
	}
	if idToken == "" {
		return Identity{}, fmt.Errorf("%w: the token response holds no id_token (is the openid scope allowed for this client?)", ErrProvider)
	}
	return v.VerifyIDToken(ctx, idToken, r.Nonce)
}

// VerifyIDToken validates an ID token (OpenID Connect Core §3.1.3.7): signed by a key the
// provider publishes with an allowed algorithm, issued by the configured issuer, for the web
// client (aud holds it; azp, when present, is it), not expired, carrying nonce. It is never
// cached: each ID token is judged once, at its callback.
func (v *Verifier) VerifyIDToken(ctx context.Context, token, nonce string) (Identity, error) {
	if len(token) > MaxTokenBytes {
		return Identity{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxTokenBytes)
	}
	id, c, err := v.verify(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	if c.AuthorizedParty != "" && c.AuthorizedParty != v.cfg.Audience {
		return Identity{}, fmt.Errorf("%w: issued to client %q (azp), not %q", ErrInvalid, clip(c.AuthorizedParty), v.cfg.Audience)
	}
	if len(c.Audience) > 1 && c.AuthorizedParty == "" {
		return Identity{}, fmt.Errorf("%w: several audiences and no azp naming this client", ErrInvalid)
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(c.Nonce), []byte(nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: its nonce is not this sign-in's", ErrInvalid)
	}
	return id, nil
}

// parseTokenResponse reads a token endpoint's answer (RFC 6749 §5.1, §5.2) exactly
// (strictjson: no duplicate or case-folded keys) and returns its id_token, or its error code.
func parseTokenResponse(body []byte) (idToken, errCode string, err error) {
	var tr struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
	}
	if err := strictjson.UnmarshalKnown(body, &tr); err != nil {
		return "", "", err
	}
	return tr.IDToken, tr.Error, nil
}
