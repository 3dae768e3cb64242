package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

func TestParse_AuthOIDC(t *testing.T) {
	c := config.Default(t.TempDir())
	src := "auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: https://agora.example.com/mcp\n    rules:\n      - {group: platform, ceiling: orchestrate, web: operator}\n"
	if err := config.Parse("agora.yaml", []byte(src), c); err != nil {
		t.Fatal(err)
	}
	if c.Auth.OIDC.ClockSkew != 30*time.Second || c.Auth.OIDC.GroupsClaim != "groups" || len(c.Auth.OIDC.Algorithms) == 0 {
		t.Fatalf("defaults not filled: %+v", c.Auth.OIDC)
	}
	for src, want := range map[string]string{
		"auth:\n  oidc:\n    audience: x\n": "issuer is required",
		"auth:\n  oidc:\n    issuer: http://id.example.com\n    audience: a\n    rules: [{group: g, ceiling: read}]\n":                                "http is allowed only to a loopback address",
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n":                                                                       "rules is empty",
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n    rules: [{group: g, ceiling: root}]\n":                               "want read, dispatch or orchestrate",
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n    rules: [{group: g, subject: s, ceiling: read}]\n":                   "exactly one of group or subject",
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n    algorithms: [HS256]\n    rules: [{group: g, web: viewer}]\n":        `"HS256" is not allowed`,
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n    allow_private: [0.0.0.0/0]\n    rules: [{group: g, web: viewer}]\n": "allows every address",
		"auth:\n  oidc:\n    issuer: https://id.example.com\n    audience: a\n    algorithms: [none]\n    rules: [{group: g, web: viewer}]\n":         `"none" is not allowed`,
	} {
		err := config.Parse("agora.yaml", []byte(src), config.Default(t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
}
