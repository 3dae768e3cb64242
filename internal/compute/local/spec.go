package local

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
)

// ErrInvalidSpec wraps every refusal of a malformed [compute.Spec].
var ErrInvalidSpec = errors.New("invalid spec")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, args...))
}

// validateSpec refuses anything that could not be passed to bwrap unambiguously. bwrap
// options travel NUL-separated (--args), so no string may contain a NUL byte; paths must
// be absolute and clean, which also keeps them from reading as options. Error messages
// name fields and indexes, never environment values.
func validateSpec(s compute.Spec) error {
	switch s.Sandbox {
	case "", compute.SandboxBwrap, compute.SandboxNone:
	default:
		return invalid("sandbox %q: want %q or %q", s.Sandbox, compute.SandboxBwrap, compute.SandboxNone)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return invalid("argv is empty")
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid("argv[%d] contains a NUL byte", i)
		}
	}
	seen := make(map[string]bool, len(s.Env))
	for i, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return invalid("env[%d] is not NAME=value", i)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return invalid("env[%d] (%q) contains a NUL byte", i, k)
		}
		if seen[k] {
			return invalid("env[%d]: %q is set twice", i, k)
		}
		seen[k] = true
	}
	if s.Dir != "" {
		if err := checkPath(s.Dir); err != nil {
			return invalid("dir: %v", err)
		}
	}
	for i, b := range s.Binds {
		if err := checkPath(b.Src); err != nil {
			return invalid("binds[%d].src: %v", i, err)
		}
		if err := checkPath(b.Dst); err != nil {
			return invalid("binds[%d].dst: %v", i, err)
		}
		if b.Dst == "/" {
			return invalid("binds[%d].dst: the sandbox root cannot be bound over", i)
		}
		if s.Sandbox == compute.SandboxNone && b.Src != b.Dst {
			return invalid("binds[%d]: sandbox %q cannot map %q to %q", i, compute.SandboxNone, b.Src, b.Dst)
		}
	}
	for i, f := range s.Files {
		if f == nil {
			return invalid("files[%d] is nil", i)
		}
	}
	l := s.Limits
	if l.Timeout < 0 || l.MaxProcs < 0 || l.FileSize < 0 || l.Memory < 0 {
		return invalid("limits must not be negative")
	}
	if u := s.RunAs; u != nil && (u.UID == 0 || u.GID == 0 || u.UID == math.MaxUint32 || u.GID == math.MaxUint32) {
		// 0 is root, which is what RunAs exists to avoid; -1 means "unchanged" to setresuid.
		return invalid("run as %d:%d: want a host uid and gid other than 0 and %d", u.UID, u.GID, uint32(math.MaxUint32))
	}
	return nil
}

func checkPath(p string) error {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("contains a NUL byte")
	case !filepath.IsAbs(p):
		return fmt.Errorf("%q is not absolute", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not clean (want %q)", p, filepath.Clean(p))
	}
	return nil
}

// workDir is the working directory inside the sandbox.
func workDir(s compute.Spec) string {
	return cmp.Or(s.Dir, "/")
}

// sandboxEnv is Spec.Env with PWD set to the working directory, which bwrap would set
// anyway; both sandbox kinds thus see the same environment.
func sandboxEnv(s compute.Spec) []string {
	env := make([]string, 0, len(s.Env)+1)
	for _, kv := range s.Env {
		if !strings.HasPrefix(kv, "PWD=") {
			env = append(env, kv)
		}
	}
	return append(env, "PWD="+workDir(s))
}
