package workerbin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// coarseCtimeDir mounts a ramfs at a new directory: a filesystem whose ctime is taken from
// the kernel's coarse clock (one tick, 1-10 ms), as ext4's and xfs's are on every kernel
// before 6.13 (Debian 12, Ubuntu 24.04, RHEL 9). It skips, loudly, without root or when
// the ctime it gives moves on every write.
func coarseCtimeDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to mount a ramfs, a filesystem with a coarse ctime")
	}
	dir := filepath.Join(t.TempDir(), "ramfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("none", dir, "ramfs", 0, "mode=0700"); err != nil {
		t.Skipf("SKIP: cannot mount a ramfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for range 50 {
		before, _ := os.Stat(p)
		os.WriteFile(p, []byte("b"), 0o600)
		after, _ := os.Stat(p)
		if identify(before).CtimeNs == identify(after).CtimeNs {
			kept++
		}
	}
	os.Remove(p)
	if kept == 0 {
		t.Skip("SKIP: this ramfs's ctime moved on each of 50 writes right after a stat: not coarse here")
	}
	return dir
}

// TestRedTeam28S3_CopyRewrittenInTheSameTickIsNotBound: on a filesystem whose ctime is
// coarse, the pinned copy is rewritten in place (same size, mtime set back) right after a
// pin, within the clock tick of the ctime the pin recorded, so that every field of its
// identity is unchanged. The next pin (a fresh Pinner, as the next dispatch) must not bind
// it: since 06ef71e it trusts the identity a fresh pin leaves with two stats, where before
// the second dispatch always hashed the copy once more.
func TestRedTeam28S3_CopyRewrittenInTheSameTickIsNotBound(t *testing.T) {
	home := coarseCtimeDir(t)
	src := installed(t, t.TempDir())
	want := sumFile(t, src)
	dir := filepath.Join(home, DirName)
	for round := range 10 {
		b, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		rewriteKeepingLooks(t, b.Path, b.Path)
		again, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := sumFile(t, again.Path); got != again.SHA256 || got != want {
			t.Fatalf("round %d: the next pin binds a copy that hashes %s; the pin says %s, the worker is %s", round, got, again.SHA256, want)
		}
	}
}

// TestRedTeam28S3_CopyRewrittenWhileItIsHashedInTheSameTick: on a filesystem whose ctime is
// coarse, the new copy is rewritten at its first byte (chmod, write, chmod back, mtime set
// back) the moment its temporary name is gone, while the fresh pin hashes it (past that
// byte already) and within the tick of the ctime the unlink left: the identity the pin
// takes after its hash is the one it took before. The next pin must not bind the
// rewritten copy. And the same 25 ms later, once the pin has waited out the tick (the
// identity it takes must then move with any change).
func TestRedTeam28S3_CopyRewrittenWhileItIsHashedInTheSameTick(t *testing.T) {
	home := coarseCtimeDir(t)
	src := installed(t, t.TempDir())
	want := sumFile(t, src)
	for round := range 20 {
		after := time.Duration(round%2) * 25 * time.Millisecond
		dir := filepath.Join(home, fmt.Sprintf("%s-%d", DirName, round))
		cp := filepath.Join(dir, Name+"-"+want)
		done := make(chan struct{})
		attacked := make(chan bool, 1)
		go func() {
			defer close(attacked)
			for {
				select {
				case <-done:
					attacked <- false
					return
				default:
				}
				names, err := os.ReadDir(dir)
				if err != nil || len(names) == 0 {
					continue
				}
				linked, tmp := false, false
				for _, n := range names {
					linked = linked || n.Name() == filepath.Base(cp)
					tmp = tmp || strings.HasPrefix(n.Name(), ".pin-")
				}
				if !linked || tmp {
					continue
				}
				time.Sleep(after)
				st, err := os.Stat(cp)
				if err != nil {
					continue
				}
				os.Chmod(cp, 0o755)
				if f, err := os.OpenFile(cp, os.O_WRONLY, 0); err == nil {
					f.WriteAt([]byte{0}, 0) // the ELF magic's first byte
					f.Close()
				}
				os.Chmod(cp, 0o555)
				os.Chtimes(cp, st.ModTime(), st.ModTime())
				attacked <- true
				return
			}
		}()
		_, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false)
		close(done)
		hit := <-attacked
		if err != nil {
			t.Logf("round %d: the racing pin refused: %v", round, err)
		}
		if !hit {
			continue
		}
		again, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := sumFile(t, again.Path); got != again.SHA256 || got != want {
			t.Fatalf("round %d: the next pin binds a copy that hashes %s; the pin says %s, the worker is %s", round, got, again.SHA256, want)
		}
	}
}
