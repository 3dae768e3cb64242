// Package podenv reads a dispatch spec's environment for the kubernetes provider: "NAME=value"
// entries whose names become keys of the dispatch's Secret. It runs on the host, imports only
// the standard library and [remote]'s variable names, and lives apart from the provider
// (which links client-go) so its fuzz target builds without the provider's import graph.
package podenv

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Var is one variable of the spec's environment.
type Var struct{ Name, Value string }

// Split parses the spec's "NAME=value" list. Names must be C identifiers (they become Secret
// keys), unique, and not one the provider sets itself. An error names the entry, never its
// value.
func Split(env []string) ([]Var, error) {
	seen := map[string]bool{}
	out := make([]Var, 0, len(env))
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !isName(name) {
			return nil, fmt.Errorf("environment entry %q: want NAME=value with NAME a C identifier", redacted(kv))
		}
		switch name {
		case remote.GatewayURLEnv, remote.TokenEnv, remote.CAEnv, remote.StageEnv, remote.RlimitsEnv, "PWD":
			return nil, fmt.Errorf("environment variable %s is set by the provider", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("environment variable %s is set twice", name)
		}
		seen[name] = true
		out = append(out, Var{name, value})
	}
	return out, nil
}

// redacted keeps an environment entry's name for a message, never its value.
func redacted(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	name = name[:min(len(name), 64)]
	return name + "=..."
}

// isName reports whether s is a C identifier of at most 200 bytes.
func isName(s string) bool {
	if s == "" || len(s) > 200 || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
