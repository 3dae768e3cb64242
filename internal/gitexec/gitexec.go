// Package gitexec is the one place agora decides how git runs so that nothing from outside
// the repository can run code or change answers: the user's and the system's configuration
// and attributes, hooks, the fsmonitor, gpg, automatic gc and maintenance, replace refs and
// prompts are off. The host runs git on repositories people name through Command (which also
// stops discovery at the directory named); the worker's capture, inside the sandbox, builds
// its own private repository and adds Flags and IsolatedEnv to its own settings.
package gitexec

import (
	"context"
	"os/exec"
	"path/filepath"
)

// Flags are the -c switches that go before every git subcommand: no hook, no fsmonitor, no
// signing program, no background gc or maintenance, no attributes file from outside.
func Flags() []string {
	return []string{
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "core.attributesFile=/dev/null",
		"-c", "commit.gpgSign=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
	}
}

// IsolatedEnv is the environment that keeps git to the repository's own settings: no system
// or user config, no system attributes, no prompt, no replace refs.
func IsolatedEnv() []string {
	return []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1"}
}

// Env is the whole environment the host runs git with in dir, plus extra.
func Env(dir string, extra ...string) []string {
	env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(filepath.Clean(dir))}, IsolatedEnv()...)
	return append(env, extra...)
}

// Command is git args in dir, as the host runs it.
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(Flags(), args...)...)
	cmd.Dir = dir
	cmd.Env = Env(dir)
	return cmd
}
