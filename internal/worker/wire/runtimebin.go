package wire

import (
	"fmt"
	"path/filepath"
	"strings"
)

// RuntimeBinDir is where the host binds a runtime's host-installed CLI, read-only: the
// claude-code runtime's claude is RuntimeBinDir/claude. It is outside the workspace, so the
// binary is never in the baseline or the patch, and the bind is read-only, so the agent
// cannot change what it runs.
const RuntimeBinDir = "/agora/runtime/bin"

// RuntimeBinary is the host-installed agent CLI a model runtime runs (package runtimebin
// resolves it on the host). It is in manifest.json and on the dispatch record.
type RuntimeBinary struct {
	// Path is where the worker runs it: RuntimeBinDir/<program> in a sandbox, the host path
	// with `sandbox: none`.
	Path string `json:"path"`
	// HostPath is the real path of the executable on the host.
	HostPath string `json:"host_path"`
	// Version is the first line of its --version.
	Version string `json:"version"`
	// SHA256 is the lowercase hex sha256 of its bytes when it was resolved.
	SHA256 string `json:"sha256"`
}

// Validate checks b's fields; errors name the field.
func (b RuntimeBinary) Validate() error {
	for _, p := range []struct{ name, v string }{{"path", b.Path}, {"host_path", b.HostPath}} {
		if !filepath.IsAbs(p.v) || filepath.Clean(p.v) != p.v || strings.ContainsRune(p.v, 0) {
			return fmt.Errorf("runtime_binary.%s: want an absolute clean path, got %q", p.name, p.v)
		}
	}
	if !isSHA256Hex(b.SHA256) {
		return fmt.Errorf("runtime_binary.sha256: want 64 lowercase hex digits")
	}
	if len(b.Version) > 256 || strings.ContainsAny(b.Version, "\x00\n") {
		return fmt.Errorf("runtime_binary.version: at most 256 bytes on one line")
	}
	return nil
}
