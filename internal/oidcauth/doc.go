// Package oidcauth turns an OAuth 2.1 bearer token from an OpenID Connect provider into an
// agora operator: it validates the token (issuer discovery on first use, the provider's
// JWKS cached and refetched on an unknown key id at a bounded rate, an algorithm allow-list,
// issuer, audience, expiry with a small clock skew) and maps its claims, through the rules in
// agora.yaml's auth.oidc, to an MCP consent ceiling and a web role. A valid token whose claims
// match no rule gets nothing (default deny).
//
// The operator it yields is named "oidc:" + issuer + "#" + subject in the audit log; the token
// itself is never stored, logged or returned. Every connection to the provider goes through
// internal/egress; nothing is fetched before the first token arrives, so a provider that is
// down at start-up delays only sign-in.
package oidcauth
