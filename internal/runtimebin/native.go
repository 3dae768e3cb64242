package runtimebin

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// maxPackageJSON caps an npm package.json read while looking for the native executable.
const maxPackageJSON = 1 << 20

// npmNative finds the native executable an npm launcher at launcher starts: the launcher's
// package is found by walking up to the package.json that names it, and the platform package
// is looked for beside it (a flat node_modules) or inside it (a nested one).
func npmNative(info runtimes.CLI, launcher string) (string, error) {
	nat, ok := info.NativeFor(runtime.GOARCH)
	if !ok {
		return "", fmt.Errorf("agora knows no native package of %s for %s", info.NPM, runtime.GOARCH)
	}
	pkgDir := ""
	for d := filepath.Dir(launcher); d != filepath.Dir(d); d = filepath.Dir(d) {
		if npmName(filepath.Join(d, "package.json")) == info.NPM {
			pkgDir = d
			break
		}
	}
	if pkgDir == "" {
		return "", fmt.Errorf("is not in the npm package %s; configure the native executable in runtimes.NAME.binary", info.NPM)
	}
	var tried []string
	for _, c := range []string{
		filepath.Join(strings.TrimSuffix(pkgDir, string(filepath.Separator)+filepath.FromSlash(info.NPM)), filepath.FromSlash(nat.Package), filepath.FromSlash(nat.Path)),
		filepath.Join(pkgDir, "node_modules", filepath.FromSlash(nat.Package), filepath.FromSlash(nat.Path)),
	} {
		tried = append(tried, c)
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if st, err := os.Stat(real); err == nil && st.Mode().IsRegular() && isELF(real) {
			return real, nil
		}
	}
	return "", fmt.Errorf("its native executable is in none of %s (reinstall %s)", strings.Join(tried, ", "), info.NPM)
}

// npmName is the "name" of the package.json at path, "" when it cannot be read.
func npmName(path string) string {
	b, err := capped.ReadFile(path, maxPackageJSON)
	if err != nil {
		return ""
	}
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Name
}

// isELF reports whether the file at path starts with the ELF magic.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		return false
	}
	return bytes.Equal(magic[:], []byte(elf.ELFMAG))
}

// boundRoots are the host directories every sandbox binds read-only (compute/local): an
// interpreter or library search path must lie below one of them.
var boundRoots = []string{"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"}

func underBoundRoot(p string) bool {
	p = filepath.Clean(p)
	for _, r := range boundRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// checkRunnable checks that the ELF at path can run in a sandbox with only the host's system
// directories: it returns the interpreter ("" for a static executable).
func checkRunnable(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read ELF %s: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	if want := goarchMachine[runtime.GOARCH]; want != elf.EM_NONE && f.Machine != want {
		return "", fmt.Errorf("%s is built for %s, this host is %s", path, f.Machine, runtime.GOARCH)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(p.Filesz, 4096))
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read the interpreter of %s: %w", path, err)
		}
		interp = string(bytes.TrimRight(b, "\x00"))
	}
	if interp != "" && !underBoundRoot(interp) {
		return "", fmt.Errorf("%s needs the interpreter %s, which the sandbox does not bind (only %s)", path, interp, strings.Join(boundRoots, ", "))
	}
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		paths, err := f.DynString(tag)
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			continue // no dynamic section: a static executable
		}
		for _, list := range paths {
			for _, d := range filepath.SplitList(list) {
				if d != "" && !underBoundRoot(d) {
					return "", fmt.Errorf("%s loads libraries from %s (%s), which the sandbox does not bind", path, d, tag)
				}
			}
		}
	}
	return interp, nil
}

var goarchMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
