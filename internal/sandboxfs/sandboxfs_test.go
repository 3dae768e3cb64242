package sandboxfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

const secret = "HOST-SECRET-KEY-MATERIAL"

// tree lays out host/keys/secret.key (outside) and host/out/ (the sandbox's directory) with
// a regular file, a nested file, and symlinks of every kind pointing out.
func tree(t testing.TB) (out string, d *Dir) {
	t.Helper()
	host := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(host, "keys"), 0o700))
	must(t, os.WriteFile(filepath.Join(host, "keys", "secret.key"), []byte(secret), 0o600))
	out = filepath.Join(host, "out")
	must(t, os.MkdirAll(filepath.Join(out, "outputs", "a"), 0o700))
	must(t, os.WriteFile(filepath.Join(out, "outputs", "a", "secret.key"), []byte("decoy"), 0o600))
	must(t, os.WriteFile(filepath.Join(out, "result.json"), []byte("{}"), 0o600))
	must(t, os.Symlink("../../keys", filepath.Join(out, "outputs", "rel")))
	must(t, os.Symlink(filepath.Join(host, "keys"), filepath.Join(out, "outputs", "abs")))
	must(t, os.Symlink("../keys/secret.key", filepath.Join(out, "link.key")))
	must(t, os.Symlink("/proc/self/root"+filepath.Join(host, "keys"), filepath.Join(out, "magic")))
	d, err := Open(out)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return out, d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// both runs f with openat2 and with the component walk.
func both(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}

func TestReadFile(t *testing.T) {
	both(t, func(t *testing.T) {
		out, d := tree(t)
		b, err := d.ReadFile("outputs/a/secret.key", 1<<20)
		if err != nil || string(b) != "decoy" {
			t.Fatalf("regular nested file: %q, %v", b, err)
		}
		if b, err := d.ReadVerified("result.json", 100, sum([]byte("{}"))); err != nil || string(b) != "{}" {
			t.Fatalf("verified: %q, %v", b, err)
		}
		must(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o600))
		must(t, os.WriteFile(filepath.Join(out, "big"), make([]byte, 101), 0o600))
		must(t, os.Link(filepath.Join(out, "result.json"), filepath.Join(out, "hard")))
		for _, c := range []struct {
			rel  string
			want error
		}{
			{"outputs/rel/secret.key", ErrSymlink},
			{"outputs/abs/secret.key", ErrSymlink},
			{"link.key", ErrSymlink},
			{"magic/secret.key", ErrSymlink},
			{"../keys/secret.key", ErrEscape},
			{"outputs/../../keys/secret.key", ErrEscape},
			{"/etc/passwd", ErrEscape},
			{"outputs//a/secret.key", ErrEscape},
			{"./result.json", ErrEscape},
			{"", ErrEscape},
			{"a\x00b", ErrEscape},
			{"outputs", ErrNotRegular},
			{"fifo", ErrNotRegular},
			{"big", ErrTooLarge},
			{"result.json", nil}, // hard-linked now: see below
		} {
			_, err := d.ReadFile(c.rel, 100)
			if c.rel == "result.json" {
				c.want = ErrHardLink
			}
			if !errors.Is(err, c.want) {
				t.Errorf("ReadFile(%q) = %v, want %v", c.rel, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error carries file content: %v", err)
			}
		}
	})
}

func TestReadVerifiedMismatch(t *testing.T) {
	_, d := tree(t)
	for _, want := range []string{sum([]byte("other")), "zz", strings.Repeat("A", 64)} {
		if b, err := d.ReadVerified("result.json", 100, want); !errors.Is(err, ErrIntegrity) || b != nil {
			t.Errorf("ReadVerified(want %s) = %q, %v; want ErrIntegrity and no bytes", want, b, err)
		}
	}
}

// TestOpenRefusesSymlinkedRoot: the host names the directory, but a symlink in its place
// is still refused.
func TestOpenRefusesSymlinkedRoot(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Symlink("/etc", filepath.Join(dir, "out")))
	if _, err := Open(filepath.Join(dir, "out")); err == nil {
		t.Fatal("Open followed a symlinked directory")
	}
}

// TestSwapRace is the swap attack on a host read: while the host reads outputs/a/secret.key, the
// agent swaps directory a for a symlink to the host's keys and back. The host must only ever
// get the decoy or a refusal, never the key.
func TestSwapRace(t *testing.T) {
	both(t, func(t *testing.T) {
		out, d := tree(t)
		a := filepath.Join(out, "outputs", "a")
		parked := filepath.Join(out, "outputs", "parked")
		link := filepath.Join(out, "outputs", "link")
		must(t, os.Symlink("../../keys", link))
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				os.Rename(a, parked)
				os.Rename(link, a) // a is now the symlink
				os.Rename(a, link)
				os.Rename(parked, a)
			}
		}()
		var got, refused int
		for range 20000 {
			b, err := d.ReadFile("outputs/a/secret.key", 1<<20)
			if bytes.Contains(b, []byte(secret)) {
				stop.Store(true)
				wg.Wait()
				t.Fatal("read the host's key through a swapped directory")
			}
			if err == nil {
				got++
			} else {
				refused++
			}
		}
		stop.Store(true)
		wg.Wait()
		t.Logf("decoy read %d times, refused %d times", got, refused)
	})
}

// FuzzReadFile: whatever path the sandbox names, the host never reads outside the directory.
func FuzzReadFile(f *testing.F) {
	for _, s := range []string{"result.json", "outputs/a/secret.key", "outputs/rel/secret.key",
		"link.key", "magic/secret.key", "../keys/secret.key", "outputs/abs/secret.key", "/", "."} {
		f.Add(s)
	}
	_, d := tree(f)
	f.Fuzz(func(t *testing.T, rel string) {
		for _, walk := range []bool{false, true} {
			noOpenat2.Store(walk)
			b, err := d.ReadFile(rel, 1<<10)
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("ReadFile(%q) (walk %v) read outside the directory", rel, walk)
			}
			if err == nil && b == nil {
				t.Fatalf("ReadFile(%q): no bytes and no error", rel)
			}
		}
		noOpenat2.Store(false)
	})
}
