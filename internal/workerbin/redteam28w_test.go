package workerbin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What sits where agora looks for its worker, and what
// happens to the pinned copy afterwards.

// TestRedTeam28W_HostileSourcesFailClosed: whatever file is at the worker's path, a pin that
// is not cmd/agora-worker's bytes fails with an error that names the path and the fix, and
// writes nothing into the pin directory: missing, a directory, a FIFO, a shell script, a
// truncated worker, a file over the size cap, another Go program (this test binary), a
// worker writable by its group, a link to one, one not executable, an empty file.
func TestRedTeam28W_HostileSourcesFailClosed(t *testing.T) {
	src := t.TempDir()
	whole, err := os.ReadFile(workerBin)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile obeys the umask
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(src, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	huge := write("huge", whole[:4096], 0o755)
	if err := os.Truncate(huge, maxSize+1); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	selfCopy := write("self", mustRead(t, self), 0o755)
	groupW := write("groupw", whole, 0o775)
	link := filepath.Join(src, "link")
	os.Symlink(groupW, link)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(src, "absent"), "no such file"},
		{"directory", t.TempDir(), "not a regular file"},
		{"fifo", fifo, "not a regular file"},
		{"script", write("script", []byte("#!/bin/sh\necho pwned\n"), 0o755), "not a Go program"},
		{"empty", write("empty", nil, 0o755), "not a Go program"},
		{"truncated", write("truncated", whole[:len(whole)/2], 0o755), "not a Go program"},
		{"over the cap", huge, "over"},
		{"another Go program", selfCopy, "not " + MainPath},
		{"group writable", groupW, "writable by its group or others"},
		{"link to a group-writable worker", link, "writable by its group or others"},
		{"not executable", write("noexec", whole, 0o644), "not executable"},
	} {
		dir := filepath.Join(t.TempDir(), DirName)
		p := &Pinner{Dir: dir}
		done := make(chan struct{})
		var b Binary
		go func() { b, err = p.Pin(t.Context(), tc.path, false); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Pin still blocked after 30s", tc.name)
		}
		if err == nil {
			t.Errorf("%s: pinned %+v, want an error", tc.name, b)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.path) ||
			!strings.Contains(msg, FixCommand) && !strings.Contains(msg, "chmod") {
			t.Errorf("%s: error %q: want it to name %s, say %q and give the fix", tc.name, msg, tc.path, tc.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: refused, yet the pin directory holds %d entries", tc.name, len(ents))
		}
		if _, err := Inspect(tc.path, false, Build{}); err == nil {
			t.Errorf("%s: Inspect (agora doctor) accepts it", tc.name)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRedTeam28W_SourceRewrittenInPlaceIsPinnedAgain: the installed worker is rewritten in
// place after a pin, with the same size and its old mtime put back (what a careful attacker
// who can write the install directory does to dodge the cache). The ctime still moved: the
// next pin reads the new bytes, and its digest is theirs, not the old pin's.
func TestRedTeam28W_SourceRewrittenInPlaceIsPinnedAgain(t *testing.T) {
	src := installed(t, t.TempDir())
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	first, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(src)
	b := mustRead(t, src)
	// A byte in the middle of the code changes the bytes and keeps the ELF headers and the
	// build information readable.
	at := len(b) / 3
	b[at] ^= 0xff
	time.Sleep(10 * time.Millisecond) // a ctime tick on coarse clocks
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[at:at+1], int64(at)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(src, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	again, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	if again.SHA256 == first.SHA256 || again.Path == first.Path {
		t.Fatalf("after an in-place rewrite, the pin is still %s", first.SHA256)
	}
	if got := sumFile(t, again.Path); got != again.SHA256 || got != sumFile(t, src) {
		t.Fatalf("bound copy hashes %s, the pin says %s", got, again.SHA256)
	}
	if got := sumFile(t, first.Path); got != first.SHA256 {
		t.Fatalf("the first pin's copy changed under it: %s", got)
	}
}

// TestRedTeam28W_CopyReplacedIsPinnedAgain: the pinned copy is replaced by another file
// (rename over it, unlink and recreate, a symlink to a shell script): the next pin, in this
// process and in a fresh one, rewrites it with the worker's bytes.
func TestRedTeam28W_CopyReplacedIsPinnedAgain(t *testing.T) {
	src := installed(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), DirName)
	p := &Pinner{Dir: dir}
	first, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(t.TempDir(), "evil")
	os.WriteFile(evil, []byte("#!/bin/sh\necho pwned\n"), 0o555)
	for _, swap := range []struct {
		name string
		do   func() error
	}{
		{"rename over", func() error {
			tmp := filepath.Join(dir, "x")
			if err := os.WriteFile(tmp, []byte("#!/bin/sh\necho pwned\n"), 0o555); err != nil {
				return err
			}
			return os.Rename(tmp, first.Path)
		}},
		{"symlink", func() error {
			if err := os.Remove(first.Path); err != nil {
				return err
			}
			return os.Symlink(evil, first.Path)
		}},
	} {
		if err := swap.do(); err != nil {
			t.Fatal(err)
		}
		for _, pp := range []*Pinner{p, {Dir: dir}} {
			b, err := pp.Pin(t.Context(), src, false)
			if err != nil {
				t.Fatalf("%s: %v", swap.name, err)
			}
			if fi, err := os.Lstat(b.Path); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: the bound copy %s is not a regular file (%v)", swap.name, b.Path, err)
			}
			if got := sumFile(t, b.Path); got != first.SHA256 || b.SHA256 != first.SHA256 {
				t.Fatalf("%s: the bound copy hashes %s, want the worker's %s", swap.name, got, first.SHA256)
			}
		}
	}
}

// TestRedTeam28W_LoosePinDir: AGORA_HOME/bin already exists writable by everyone (made by
// hand, or by an older tool under a loose umask; agora keeps an existing AGORA_HOME's mode),
// or belongs to another user. Whoever can write it could replace a copy between its pin and
// its bind. The pin refuses such a directory with the fix, and pins nothing there; once
// fixed, it pins.
func TestRedTeam28W_LoosePinDir(t *testing.T) {
	src := installed(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), DirName)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	b, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false)
	if err == nil {
		t.Fatalf("pinned %s into %s, mode 0777: anyone may replace the copy before it is bound", b.Path, dir)
	}
	if !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Errorf("error %q does not give the fix", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused, yet %s holds %d entries", dir, len(ents))
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Pinner{Dir: dir}).Pin(t.Context(), src, false); err != nil {
		t.Fatalf("after chmod go-w: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the other-owner half needs root to chown the directory")
	}
	other := filepath.Join(t.TempDir(), DirName)
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if b, err := (&Pinner{Dir: other}).Pin(t.Context(), src, false); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("pin into a directory of uid 65534: %+v, %v; want refused", b, err)
	}
}

// TestRedTeam28W_LinkIntoWritableDir: the path agora pins (agora-worker beside agora, or
// AGORA_WORKER_BINARY) is a symlink, in a directory only its owner writes, to a worker in a
// directory anyone may write (no sticky bit), or in a subdirectory of one. Whoever can write
// that directory can put another file where the link points, so the pin must refuse it as it
// refuses the same file named directly.
func TestRedTeam28W_LinkIntoWritableDir(t *testing.T) {
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(open, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, target string }{
		{"direct", installed(t, open)},
		{"link", installed(t, open)},
		{"link to a subdirectory of an open one", installed(t, sub)},
	} {
		path := tc.target
		if tc.name != "direct" {
			path = filepath.Join(t.TempDir(), Name)
			if err := os.Symlink(tc.target, path); err != nil {
				t.Fatal(err)
			}
		}
		b, err := (&Pinner{Dir: filepath.Join(t.TempDir(), DirName)}).Pin(t.Context(), path, true)
		if err == nil {
			t.Errorf("%s: pinned %s (really %s, in a directory anyone may write)", tc.name, b.Path, tc.target)
		}
	}
}

// TestRedTeam28W_UpgradedAgoraRefusesCachedOldWorker: agora is upgraded alone (`go install
// ./cmd/agora`), the worker beside it is the old one, untouched. An earlier agora pinned it,
// so the pin index describes it exactly. The new agora must still refuse it as built from
// other source, not take the old process's pin on trust; and the same holds within one
// process whose Expect changes.
func TestRedTeam28W_UpgradedAgoraRefusesCachedOldWorker(t *testing.T) {
	src := installed(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), DirName)
	old := &Pinner{Dir: dir, Expect: &Build{}} // the old agora: whatever the worker is, it agrees
	if _, err := old.Pin(t.Context(), src, false); err != nil {
		t.Fatal(err)
	}
	upgraded := &Pinner{Dir: dir, Expect: &Build{Version: "v9.9.9"}}
	b, err := upgraded.Pin(t.Context(), src, false)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("the upgraded agora (v9.9.9) pinned the old worker %+v (err %v); want a *MismatchError", b, err)
	}
}
