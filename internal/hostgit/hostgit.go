// Package hostgit runs git on the host, against repositories people name, with nothing from
// outside the repository able to run code or change answers: the user's and the system's
// configuration and attributes, hooks, the fsmonitor, replace refs and prompts are off, and
// discovery never climbs above the directory it starts in. It is the one place the host's
// git environment is decided; the worker's capture, inside the sandbox, has its own.
package hostgit

import (
	"context"
	"os/exec"
	"path/filepath"
)

// flags go before every subcommand.
var flags = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}

// Env is the whole environment git runs with in dir, plus extra.
func Env(dir string, extra ...string) []string {
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1",
		"LANG=C", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(filepath.Clean(dir))}, extra...)
}

// Command is git args in dir.
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(append([]string(nil), flags...), args...)...)
	cmd.Dir = dir
	cmd.Env = Env(dir)
	return cmd
}
