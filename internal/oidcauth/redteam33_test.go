package oidcauth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam33_WebClientIsNotTheMCPAudience: with auth.oidc.audience (what MCP HTTP accepts in
// a bearer token's aud) equal to auth.oidc.web.client_id (the web view's ID tokens' aud), an
// ID token of the web sign-in, meant for agora's callback and bound to one flow's nonce, is a
// bearer token for MCP HTTP with the rules' ceiling (and so is any access token the provider
// issues to the web client). Failed before: the MCP verifier of that configuration accepted
// the web flow's ID token as oidc:ISSUER#id1 with ceiling orchestrate. Now the configuration is
// refused, for both verifiers, naming both keys.
func TestRedTeam33_WebClientIsNotTheMCPAudience(t *testing.T) {
	p := webProvider(t)
	web := newWebVerifier(t, p.Issuer, webClient, nil)
	r := newAuthRequest()
	tok := idToken(t, p, web, r, oidctest.User1)

	c := config(p.Issuer)
	c.Audience = webClient
	c.Web = oidcauth.WebClient{ClientID: webClient, RedirectURL: webRedirect}
	mcp, err := oidcauth.New(c, oidcauth.Options{})
	if err == nil {
		id, verr := mcp.Verify(context.Background(), tok)
		t.Fatalf("audience = web.client_id was accepted; the MCP verifier then takes the web sign-in's ID token as a bearer token: %s ceiling %q, %v", id.Actor(), id.Grant.Ceiling, verr)
	}
	if !strings.Contains(err.Error(), "auth.oidc.audience") || !strings.Contains(err.Error(), "auth.oidc.web.client_id") {
		t.Fatalf("the refusal does not name both keys: %v", err)
	}
	if _, err := oidcauth.NewWeb(c, oidcauth.Options{}); err == nil {
		t.Fatal("the web verifier of audience = web.client_id was made")
	}
	// The web verifier of a distinct audience still verifies its ID token, and the MCP
	// verifier of that configuration refuses it.
	c.Audience = aud
	mcp, err = oidcauth.New(c, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcp.Verify(context.Background(), tok); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("the MCP verifier took the web sign-in's ID token: %v", err)
	}
	if _, err := web.VerifyIDToken(context.Background(), tok, r.Nonce); err != nil {
		t.Fatalf("the web verifier: %v", err)
	}
}
