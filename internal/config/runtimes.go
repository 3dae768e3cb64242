package config

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// The runtimes section accepts the runtimes whose agent CLI is a program installed on the
// host (runtimes.Hosted; package runtimebin resolves it). The other runtimes (exec, openai)
// run inside agora and have nothing to configure.

// Runtime configures one host-installed agent CLI:
//
//	runtimes:
//	  claude-code: {binary: /usr/local/bin/claude}
//	  codex: {binary: /opt/codex/bin/codex}
//
// The binary is set by the people who run agora, never by a capability or a dispatch: it is
// bound read-only into every sandbox of that runtime.
type Runtime struct {
	// Binary is the absolute path of the CLI. Empty (the default) means the runtime's program
	// ("claude", "codex") found on agora's PATH when a dispatch resolves it. A symlink or an
	// npm launcher is followed to the native executable.
	Binary string `yaml:"binary"`
}

// RuntimeBinary returns the configured binary of runtime name, "" when none is set.
func (c *Config) RuntimeBinary(name string) string {
	return c.Runtimes[name].Binary
}

// validateRuntimes checks the runtimes section: known names, absolute clean paths.
func validateRuntimes(pos *strictyaml.Positions, rs map[string]Runtime) strictyaml.Errors {
	var errs strictyaml.Errors
	names := slices.Sorted(maps.Keys(rs))
	for _, n := range names {
		p := "runtimes." + n
		if hosted := runtimes.Hosted(); !slices.Contains(hosted, n) {
			errs = append(errs, pos.Errorf(p, "runtime %q has no host binary to configure; known: %s", n, strings.Join(hosted, ", ")))
			continue
		}
		b := rs[n].Binary
		if b == "" {
			continue
		}
		if !filepath.IsAbs(b) || filepath.Clean(b) != b {
			errs = append(errs, pos.Errorf(p+".binary", "must be an absolute, clean path, got %q", b))
		}
	}
	return errs
}
