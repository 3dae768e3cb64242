package workerbin

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rewriteKeepingLooks flips one byte of path in place (at the middle: the build info is
// elsewhere) and puts back its mode and mtime: same inode, same size, same mtime, other
// bytes. Only the ctime can tell, and it is what the pin's identity rests on (06ef71e, a
// pin taken on two stats from the second dispatch on).
func rewriteKeepingLooks(t *testing.T, path, via string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(via, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(via, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := st.Size() / 2
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(via, st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if after.Size() != st.Size() || !after.ModTime().Equal(st.ModTime()) {
		t.Fatalf("the rewrite changed size or mtime: %v %v -> %v %v", st.Size(), st.ModTime(), after.Size(), after.ModTime())
	}
}

// TestRedTeam28S3_CopyRewrittenWithSameLooksIsNotBound: right after a pin (within the same
// clock tick, so a coarse ctime would not move), the pinned copy is rewritten in place with
// the same size and mtime, directly or through a hard link made and removed around it. The
// next pin, in this process and in a fresh one that reads the index, must not bind it: the
// copy it returns holds the bytes of its digest.
func TestRedTeam28S3_CopyRewrittenWithSameLooksIsNotBound(t *testing.T) {
	src := installed(t, t.TempDir())
	want := sumFile(t, src)
	dir := filepath.Join(t.TempDir(), DirName)
	p := &Pinner{Dir: dir}
	for i := range 6 {
		b, err := p.Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		via := b.Path
		if i%2 == 1 {
			via = filepath.Join(dir, "elsewhere")
			if err := os.Link(b.Path, via); err != nil {
				t.Fatal(err)
			}
		}
		rewriteKeepingLooks(t, b.Path, via)
		if via != b.Path {
			if err := os.Remove(via); err != nil {
				t.Fatal(err)
			}
		}
		for _, pp := range []*Pinner{p, {Dir: dir}} {
			again, err := pp.Pin(t.Context(), src, false)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if got := sumFile(t, again.Path); got != again.SHA256 || got != want {
				t.Fatalf("round %d: the bound copy hashes %s, the pin says %s, the worker is %s", i, got, again.SHA256, want)
			}
		}
	}
}

// TestRedTeam28S3_SourceRewrittenWithSameLooksIsPinnedAgain: the worker at its installed path
// is rewritten in place with the same size and mtime right after a pin (the bytes still
// carry cmd/agora-worker's build info). The next pin must read it again: the digest it
// returns is that of the bytes now at the source, and the copy holds them.
func TestRedTeam28S3_SourceRewrittenWithSameLooksIsPinnedAgain(t *testing.T) {
	src := installed(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), DirName)
	p := &Pinner{Dir: dir}
	for i := range 4 {
		if _, err := p.Pin(t.Context(), src, false); err != nil {
			t.Fatal(err)
		}
		rewriteKeepingLooks(t, src, src)
		now := sumFile(t, src)
		for _, pp := range []*Pinner{p, {Dir: dir}} {
			again, err := pp.Pin(t.Context(), src, false)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if again.SHA256 != now || sumFile(t, again.Path) != now {
				t.Fatalf("round %d: pinned %s (copy %s), the source now hashes %s", i, again.SHA256, sumFile(t, again.Path), now)
			}
		}
	}
}

// TestRedTeam28S3_SourceSymlinkRetargetedIsPinnedAgain: the configured worker path is a
// symlink; it is pointed at another build of the same size whose mtime is set to the
// first's. The pin follows the link to what it names now.
func TestRedTeam28S3_SourceSymlinkRetargetedIsPinnedAgain(t *testing.T) {
	a := installed(t, t.TempDir())
	b := installed(t, t.TempDir())
	rewriteKeepingLooks(t, b, b) // other bytes, same size
	st, _ := os.Stat(a)
	if err := os.Chtimes(b, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), Name)
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), DirName)
	p := &Pinner{Dir: dir}
	first, err := p.Pin(t.Context(), link, false)
	if err != nil {
		t.Fatal(err)
	}
	if first.SHA256 != sumFile(t, a) {
		t.Fatalf("first pin %s, want a's %s", first.SHA256, sumFile(t, a))
	}
	tmp := link + ".new"
	if err := os.Symlink(b, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, pp := range []*Pinner{p, {Dir: dir}} {
		again, err := pp.Pin(t.Context(), link, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := sumFile(t, b); again.SHA256 != want || sumFile(t, again.Path) != want {
			t.Fatalf("after the retarget: pinned %s, the link now names %s (%v after)", again.SHA256, want, time.Since(start))
		}
	}
}
