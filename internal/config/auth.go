package config

import (
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// Auth is agora.yaml's auth: operators from an identity provider. Absent, MCP HTTP and
// the web view accept their static tokens only.
type Auth struct {
	// OIDC: auth: {oidc: {issuer, audience, rules: [{group, ceiling, web}], ...}}; see
	// oidcauth.Config and docs/operations.md "Operators from an identity provider".
	OIDC oidcauth.Config `yaml:"oidc"`
}

// validateAuth checks auth.oidc when it is given, filling its defaults.
func validateAuth(pos *strictyaml.Positions, a *Auth) strictyaml.Errors {
	if !a.OIDC.Enabled() {
		if a.OIDC.Audience != "" || len(a.OIDC.Rules) > 0 {
			return strictyaml.Errors{pos.Errorf("auth.oidc", "issuer is required")}
		}
		return nil
	}
	if err := a.OIDC.Validate(); err != nil {
		return strictyaml.Errors{pos.Errorf("auth.oidc", "%v", err)}
	}
	return nil
}
