package agoratest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// VerifyGoCache returns a build cache directory for a target's verify_cache, warmed with what
// `go test` of a module importing only "testing" builds (the standard library's part of it),
// so the tests' `go test` gates compile their module and not the standard library in their
// empty sandbox every run (20 s idle, minutes under CI's load). It is one directory per user
// (below os.UserCacheDir), shared by every test package and kept between runs; the warming
// runs under a lock, with the verify sandbox's environment (only PATH, HOME, TMPDIR, LANG and
// XDG_CACHE_HOME), so its cache keys are the gate's. goBin is the toolchain's bin directory.
func VerifyGoCache(t testing.TB, goBin string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("verify Go cache: %v", err)
	}
	dir := filepath.Join(base, "agora-test", "verify-cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("verify Go cache: %v", err)
	}
	// The sandbox user reads it: the directory's own mode must let it (the bind hides the
	// modes above it).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("verify Go cache: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(base, "agora-test", "verify-cache.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("verify Go cache: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("verify Go cache: lock: %v", err)
	}
	mod := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":       "module example.com/warm\n\ngo 1.22\n",
		"warm.go":      "package warm\n\nfunc One() int { return 1 }\n",
		"warm_test.go": "package warm\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {\n\tif One() != 1 {\n\t\tt.Fatal(\"One() != 1\")\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatalf("verify Go cache: %v", err)
		}
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(goBin, "go"), "test", "-count=1", "./...")
	cmd.Dir = mod
	cmd.Env = []string{"PATH=" + goBin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home,
		"LANG=C.UTF-8", "XDG_CACHE_HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("verify Go cache: warm it with go test: %v\n%s", err, out)
	}
	// Go makes the cache's files 0644 and directories 0755 under the usual umask; a tighter
	// umask would hide them from the sandbox user, so say so here rather than in the gate.
	var bad string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || bad != "" {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o004 == 0 {
			bad = p
		}
		return nil
	})
	if bad != "" {
		t.Fatalf("verify Go cache: %s is not world-readable (umask?): the sandbox user could not read it", bad)
	}
	return dir
}
