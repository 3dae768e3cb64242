package runtimebin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// copyExe copies this test binary to dir/name (mode 0755) and returns the path.
func copyExe(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return copyFile(t, self, filepath.Join(dir, name), 0o755)
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestResolve_PathAndSymlink(t *testing.T) {
	dir := t.TempDir()
	exe := copyExe(t, filepath.Join(dir, "opt"), "claude")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{PATH: "relative:" + bin}
	b, err := r.Resolve(t.Context(), "claude-code", "")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if b.Path != exe {
		t.Errorf("Path = %q, want the symlink's target %q", b.Path, exe)
	}
	if b.Version != "9.9.9 (Claude Code)" {
		t.Errorf("Version = %q", b.Version)
	}
	if want := sha(t, exe); b.SHA256 != want {
		t.Errorf("SHA256 = %s, want %s", b.SHA256, want)
	}
	if b.SandboxPath() != "/agora/runtime/bin/claude" {
		t.Errorf("SandboxPath = %q", b.SandboxPath())
	}
	// The configured path wins over PATH and is resolved the same way.
	b2, err := r.Resolve(t.Context(), "claude-code", filepath.Join(bin, "claude"))
	if err != nil || b2.Path != exe {
		t.Errorf("Resolve(configured) = %+v, %v; want %s", b2, err, exe)
	}
}

func TestResolve_NotFound(t *testing.T) {
	empty := t.TempDir()
	r := &Resolver{PATH: empty}
	_, err := r.Resolve(t.Context(), "codex", "")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Resolve = %v, want *NotFoundError", err)
	}
	for _, w := range []string{`"codex" not found on PATH`, "npm install -g @openai/codex", "runtimes.codex.binary"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	_, err = r.Resolve(t.Context(), "claude-code", filepath.Join(empty, "nope"))
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "npm install -g @anthropic-ai/claude-code") || !strings.Contains(err.Error(), "runtimes.claude-code.binary") {
		t.Errorf("Resolve(missing configured) = %v", err)
	}
	_, err = r.Resolve(t.Context(), "exec", "")
	var ur *UnknownRuntimeError
	if !errors.As(err, &ur) || !strings.Contains(err.Error(), "known: claude-code, codex") {
		t.Errorf("Resolve(exec) = %v, want the known list", err)
	}
	// A directory or a non-executable file is no binary.
	if _, err := r.Resolve(t.Context(), "codex", empty); err == nil {
		t.Error("Resolve(directory) = nil error")
	}
	shared := copyExe(t, t.TempDir(), "codex")
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(t.Context(), "codex", shared); err == nil || !strings.Contains(err.Error(), "writable by its group or others") || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("Resolve(0777 file) = %v, want refused as writable by others", err)
	}
	plain := filepath.Join(empty, "codex")
	copyFile(t, "/proc/self/exe", plain, 0o644)
	if _, err := r.Resolve(t.Context(), "codex", plain); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("Resolve(0644 file) = %v, want not executable", err)
	}
}

// npmLayout builds a node_modules like `npm install` leaves it: the main package's bin is a
// Node script (the launcher) and the native executable is in the platform package, beside it
// (flat) or inside it (nested).
func npmLayout(t *testing.T, rt string, nested bool) (launcher, native string) {
	t.Helper()
	info, _ := known(rt)
	nat, ok := info.NativeFor(runtime.GOARCH)
	if !ok {
		t.Skipf("SKIP: no native package for %s", runtime.GOARCH)
	}
	nm := filepath.Join(t.TempDir(), "lib", "node_modules")
	pkg := filepath.Join(nm, info.NPM)
	write(t, filepath.Join(pkg, "package.json"), `{"name": "`+info.NPM+`", "version": "1.0.0"}`, 0o644)
	launcher = write(t, filepath.Join(pkg, "bin", "launcher.js"), "#!/usr/bin/env node\nrequire('child_process')\n", 0o755)
	base := nm
	if nested {
		base = filepath.Join(pkg, "node_modules")
	}
	native = filepath.Join(base, nat.Package, nat.Path)
	copyExe(t, filepath.Dir(native), filepath.Base(native))
	bin := filepath.Join(filepath.Dir(filepath.Dir(nm)), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bin, info.Program)
	if err := os.Symlink(launcher, link); err != nil {
		t.Fatal(err)
	}
	return link, native
}

func write(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolve_NPMLauncher(t *testing.T) {
	for _, rt := range []string{"claude-code", "codex"} {
		for _, nested := range []bool{false, true} {
			t.Run(rt, func(t *testing.T) {
				link, native := npmLayout(t, rt, nested)
				r := &Resolver{PATH: filepath.Dir(link)}
				b, err := r.Resolve(t.Context(), rt, "")
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if b.Path != native {
					t.Errorf("Path = %q, want the native %q (not the Node launcher)", b.Path, native)
				}
				if b.Version == "" {
					t.Error("no version")
				}
			})
		}
	}
}

func TestResolve_ScriptOutsideNPM(t *testing.T) {
	dir := t.TempDir()
	script := write(t, filepath.Join(dir, "claude"), "#!/bin/sh\necho 1.0\n", 0o755)
	_, err := (&Resolver{}).Resolve(t.Context(), "claude-code", script)
	if err == nil || !strings.Contains(err.Error(), "not a native executable") || !strings.Contains(err.Error(), "@anthropic-ai/claude-code") {
		t.Errorf("Resolve(shell script) = %v, want refused as not native", err)
	}
	// A launcher whose native package is missing says where it looked.
	link, native := npmLayout(t, "codex", false)
	if err := os.Remove(native); err != nil {
		t.Fatal(err)
	}
	_, err = (&Resolver{PATH: filepath.Dir(link)}).Resolve(t.Context(), "codex", "")
	if err == nil || !strings.Contains(err.Error(), "reinstall @openai/codex") {
		t.Errorf("Resolve(no native) = %v", err)
	}
}

func TestResolve_InterpreterOutsideSandbox(t *testing.T) {
	const interp = "/lib64/ld-linux-x86-64.so.2"
	src, err := os.ReadFile("/usr/bin/true")
	if err != nil || !strings.Contains(string(src), interp) {
		t.Skip("SKIP: /usr/bin/true is not a glibc x86-64 dynamic executable")
	}
	// Same length, so the ELF stays well-formed; /opt64 is bound in no sandbox.
	patched := strings.Replace(string(src), interp, "/opt64/ld-linux-x86-64.so.2", 1)
	p := write(t, filepath.Join(t.TempDir(), "claude"), patched, 0o755)
	_, err = (&Resolver{}).Resolve(t.Context(), "claude-code", p)
	if err == nil || !strings.Contains(err.Error(), "needs the interpreter /opt64/ld-linux-x86-64.so.2, which the sandbox does not bind") {
		t.Errorf("Resolve = %v, want the interpreter refused", err)
	}
}

func TestResolve_VersionTimeout(t *testing.T) {
	p := copyExe(t, t.TempDir(), "hang")
	r := &Resolver{VersionTimeout: 300 * time.Millisecond}
	done := make(chan error, 1)
	go func() { _, err := r.Resolve(t.Context(), "codex", p); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // the "CLI" hangs until killed: a Resolve that never kills it never returns
		t.Fatal("Resolve has not returned a minute into a 300ms timeout: the hung --version was not killed")
	}
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Errorf("Resolve = %v, want a version timeout", err)
	}
}

func TestResolve_Cache(t *testing.T) {
	dir := t.TempDir()
	exe := copyExe(t, dir, "codex")
	cache := filepath.Join(dir, "runtimebin.json")
	b, err := (&Resolver{CacheFile: cache}).Resolve(t.Context(), "codex", exe)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(cache)
	if err != nil {
		t.Fatalf("no cache file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode = %v, want 0600", st.Mode().Perm())
	}
	// Mark the entry: a fresh Resolver (another process) returning the mark used the cache.
	mark := func() {
		r := &Resolver{CacheFile: cache}
		all := r.readFile()
		e := all[exe]
		e.SHA256 = strings.Repeat("ab", 32)
		r.mu.Lock()
		r.mem = nil
		r.mu.Unlock()
		all[exe] = e
		r.store(exe, e)
	}
	mark()
	got, err := (&Resolver{CacheFile: cache}).Resolve(t.Context(), "codex", exe)
	if err != nil || got.SHA256 != strings.Repeat("ab", 32) {
		t.Fatalf("unchanged file: SHA256 = %s, %v; want the cached mark", got.SHA256, err)
	}

	// Replace the bytes but keep size and mtime: ctime still moves, so the digest is redone.
	info, _ := os.Stat(exe)
	content, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(content), "TestResolve_Cache") // a test's name: data, unused on --version
	if at < 0 {
		t.Fatal("the test binary does not hold its own test's name")
	}
	f, err := os.OpenFile(exe, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), int64(at)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(exe, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, err = (&Resolver{CacheFile: cache}).Resolve(t.Context(), "codex", exe)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha(t, exe); got.SHA256 != want || got.SHA256 == b.SHA256 {
		t.Errorf("changed file: SHA256 = %s, want the new %s (old %s)", got.SHA256, want, b.SHA256)
	}

	// A garbage cache file is ignored, not trusted.
	write(t, cache, "{not json", 0o600)
	if got, err := (&Resolver{CacheFile: cache}).Resolve(t.Context(), "codex", exe); err != nil || got.SHA256 != sha(t, exe) {
		t.Errorf("garbage cache: %+v, %v", got, err)
	}
}

// TestResolve_Real resolves the real CLIs installed by scripts/agent-clis.sh.
func TestResolve_Real(t *testing.T) {
	for _, tc := range []struct{ rt, env, rel, version string }{
		{"claude-code", "AGORA_TEST_CLAUDE", "node_modules/.bin/claude", "(Claude Code)"},
		{"codex", "AGORA_TEST_CODEX", "node_modules/.bin/codex", "codex-cli"},
	} {
		t.Run(tc.rt, func(t *testing.T) {
			p := os.Getenv(tc.env)
			if p == "" {
				p = filepath.Join("..", "..", ".cache", "npm", tc.rel)
			}
			if _, err := os.Stat(p); err != nil {
				t.Skipf("SKIP: the real %s CLI is not installed (run scripts/agent-clis.sh or set %s)", tc.rt, tc.env)
			}
			abs, _ := filepath.Abs(p)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			b, err := (&Resolver{}).Resolve(ctx, tc.rt, abs)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !isELF(b.Path) || !strings.Contains(b.Version, tc.version) || len(b.SHA256) != 64 {
				t.Errorf("Resolve = %+v", b)
			}
			t.Logf("%s: %s %s (%d bytes)", tc.rt, b.Path, b.Version, b.Size)
		})
	}
}
