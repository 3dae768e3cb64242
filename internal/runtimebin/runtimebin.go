// Package runtimebin finds and describes the host-installed agent CLIs (Claude Code, Codex)
// that agora binds read-only into a sandbox instead of copying them into it.
//
// The one entry point is [Resolve] (or [Resolver.Resolve] with a cache file that survives the
// process): it takes the runtime name and the path agora.yaml configures (runtimes.NAME.binary,
// "" for the PATH), and returns a [Binary]: the real path of the native executable (symlinks
// and npm's Node launchers followed, so no Node is needed in the sandbox), its version and its
// sha256. Version and digest are cached by the file's identity (device, inode, size, mtime,
// ctime), so a dispatch does not rehash a 400 MB binary each time.
//
// The binary must be runnable in a sandbox that sees only the host's /usr and the /lib, /bin
// links: a static executable, or a dynamic one whose interpreter lives there and that names no
// library search path outside it. Anything else is refused with the reason.
package runtimebin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// Binary is a resolved agent CLI on the host.
type Binary struct {
	// Runtime is the runtime name ("claude-code", "codex").
	Runtime string `json:"runtime"`
	// Path is the absolute real path of the native executable on the host.
	Path string `json:"path"`
	// Version is the first line of `Path --version`.
	Version string `json:"version"`
	// SHA256 is the lowercase hex sha256 of the executable's bytes.
	SHA256 string `json:"sha256"`
	// Size is the executable's size in bytes.
	Size int64 `json:"size"`
	// Interpreter is the ELF program interpreter of a dynamic executable ("" for a static
	// one); it and the libraries it loads come from the host's /usr and /lib, which every
	// sandbox already binds read-only.
	Interpreter string `json:"interpreter,omitempty"`
}

// SandboxDir is where a dispatch binds runtime binaries inside the sandbox, read-only.
const SandboxDir = "/agora/runtime/bin"

// SandboxPath is where b is bound inside the sandbox: SandboxDir/<program>.
func (b Binary) SandboxPath() string {
	cli, _ := known(b.Runtime)
	return SandboxDir + "/" + cli.Program
}

// known returns the CLI of runtime, and whether it is a host runtime (package runtimes says
// what each runtime is).
func known(runtime string) (runtimes.CLI, bool) {
	rt, ok := runtimes.Lookup(runtime)
	return rt.CLI, ok && rt.Hosted()
}

// Runtimes lists the runtime names Resolve knows, sorted.
func Runtimes() []string { return runtimes.Hosted() }

// Program is the command name of runtime's CLI ("claude", "codex"), "" for an unknown one.
func Program(runtime string) string {
	cli, _ := known(runtime)
	return cli.Program
}

// InstallCommand is how a person installs runtime's CLI, "" for an unknown runtime.
func InstallCommand(runtime string) string {
	if cli, ok := known(runtime); ok {
		return "npm install -g " + cli.NPM
	}
	return ""
}

// NotFoundError means the runtime's CLI is not installed where agora looked.
type NotFoundError struct {
	Runtime    string
	Configured string // runtimes.NAME.binary, "" when the PATH was searched
	PATH       string // the PATH searched
	Err        error
}

func (e *NotFoundError) Error() string {
	fix := fmt.Sprintf("install it with `%s`", InstallCommand(e.Runtime))
	if e.Configured != "" {
		return fmt.Sprintf("%s runtime: runtimes.%s.binary %q: %v; %s or fix agora.yaml", e.Runtime, e.Runtime, e.Configured, e.Err, fix)
	}
	return fmt.Sprintf("%s runtime: %q not found on PATH (%s); %s or set runtimes.%s.binary in agora.yaml",
		e.Runtime, Program(e.Runtime), e.PATH, fix, e.Runtime)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// UnknownRuntimeError means Resolve was asked for a runtime with no host binary.
type UnknownRuntimeError struct{ Runtime string }

func (e *UnknownRuntimeError) Error() string {
	return fmt.Sprintf("runtime %q has no host binary; known: %s", e.Runtime, strings.Join(Runtimes(), ", "))
}

// Resolve resolves runtime's CLI with a cache that lives as long as the process. configured
// is runtimes.NAME.binary from agora.yaml ("" searches agora's own PATH).
func Resolve(ctx context.Context, runtime, configured string) (Binary, error) {
	return defaultResolver.Resolve(ctx, runtime, configured)
}

var defaultResolver = &Resolver{}

// locate finds the native executable: configured or PATH, symlinks followed, an npm launcher
// replaced by the native executable it starts.
func locate(runtime, configured, pathEnv string) (string, error) {
	info, _ := known(runtime)
	p := configured
	if p == "" {
		var err error
		if p, err = lookPath(info.Program, pathEnv); err != nil {
			return "", &NotFoundError{Runtime: runtime, PATH: pathEnv, Err: err}
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", &NotFoundError{Runtime: runtime, Configured: configured, PATH: pathEnv, Err: err}
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", &NotFoundError{Runtime: runtime, Configured: configured, PATH: pathEnv, Err: err}
	}
	if !st.Mode().IsRegular() {
		return "", &NotFoundError{Runtime: runtime, Configured: configured, PATH: pathEnv, Err: errors.New("not a regular file")}
	}
	if isELF(real) {
		return real, nil
	}
	native, err := npmNative(info, real)
	if err != nil {
		return "", fmt.Errorf("%s runtime: %s is not a native executable and %w", runtime, real, err)
	}
	return native, nil
}

// lookPath is exec.LookPath against pathEnv rather than the process's PATH.
func lookPath(name, pathEnv string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the working directory
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w", name, os.ErrNotExist)
}
