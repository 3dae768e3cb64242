package workerbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installed copies the test's worker binary to dir/agora-worker, mode 0755, as make install
// would put it beside agora.
func installed(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(workerBin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, Name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func sumFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestPin_BindsTheBytesItHashed(t *testing.T) {
	src := installed(t, t.TempDir())
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	b, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	if b.Source != src || b.Path == src || filepath.Dir(b.Path) != p.Dir {
		t.Fatalf("pinned %+v: want a copy in %s of %s", b, p.Dir, src)
	}
	if got := sumFile(t, b.Path); got != b.SHA256 || got != sumFile(t, src) {
		t.Fatalf("copy's sha256 %s, pin says %s", got, b.SHA256)
	}
	if b.Path != filepath.Join(p.Dir, Name+"-"+b.SHA256) {
		t.Errorf("copy %s is not named by its digest", b.Path)
	}
	st, err := os.Stat(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o555 {
		t.Errorf("copy mode %v, want 0555 (a sandbox's own uid must run it, nobody write it)", st.Mode().Perm())
	}
	// A second process (a fresh Pinner over the same Dir) takes the pin from the index
	// without rewriting the copy.
	again, err := (&Pinner{Dir: p.Dir}).Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(b.Path)
	if again != b || identify(st2) != identify(st) {
		t.Errorf("second pin %+v (copy rewritten: %v), want %+v unchanged", again, identify(st2) != identify(st), b)
	}
}

// The attack: once pinned, the copy is changed in place (someone who can write AGORA_HOME,
// or a `sandbox: none` agent running as agora's user). The next dispatch must not bind it.
func TestPin_ChangedCopyIsPinnedAgain(t *testing.T) {
	src := installed(t, t.TempDir())
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	b, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(b.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(b.Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("#!/bin/sh\necho pwned\n"), 0)
	f.Close()
	again, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := sumFile(t, again.Path); got != b.SHA256 || again.SHA256 != b.SHA256 {
		t.Fatalf("after tampering, the bound copy hashes %s, want the worker's %s", got, b.SHA256)
	}
}

func TestPin_ReplacedSourceIsPinnedAgain(t *testing.T) {
	dir := t.TempDir()
	src := installed(t, dir)
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	first, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	// An upgrade: another build of the worker (here the same one with a byte appended,
	// which leaves its build information readable) replaces the file.
	b, _ := os.ReadFile(src)
	tmp := filepath.Join(dir, "new")
	if err := os.WriteFile(tmp, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, src); err != nil {
		t.Fatal(err)
	}
	second, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	if second.SHA256 == first.SHA256 || sumFile(t, second.Path) != second.SHA256 || second.SHA256 != sumFile(t, src) {
		t.Fatalf("after an upgrade the pin is %s (source %s), first was %s", second.SHA256, sumFile(t, src), first.SHA256)
	}
}

func TestPin_Refusals(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		source func(t *testing.T) string
		expect *Build
		want   []string
		as     any
	}{
		{name: "missing", source: func(t *testing.T) string { return filepath.Join(t.TempDir(), Name) },
			want: []string{"no such file", "make install", "go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker"}, as: new(*MissingError)},
		{name: "another program", source: func(t *testing.T) string {
			// A Go program that is not the worker: this test binary.
			b, _ := os.ReadFile(self)
			p := filepath.Join(t.TempDir(), Name)
			os.WriteFile(p, b, 0o755)
			return p
		}, want: []string{"not github.com/agora-dev/agora/cmd/agora-worker", "make install"}, as: new(*MissingError)},
		{name: "not a program", source: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), Name)
			os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
			return p
		}, want: []string{"not a Go program"}, as: new(*MissingError)},
		{name: "other source", source: func(t *testing.T) string { return installed(t, t.TempDir()) },
			expect: &Build{Version: "v9.9.9"}, want: []string{"but this agora is agora v9.9.9", "make install"}, as: new(*MismatchError)},
		{name: "other commit", source: func(t *testing.T) string { return installed(t, t.TempDir()) },
			expect: &Build{Revision: "0123456789abcdef0123456789abcdef01234567", Modified: "false"}, want: []string{"commit 0123456789abcdef"}, as: new(*MismatchError)},
		{name: "group writable", source: func(t *testing.T) string {
			p := installed(t, t.TempDir())
			os.Chmod(p, 0o775)
			return p
		}, want: []string{"writable by its group or others", "chmod go-w"}},
		{name: "directory others may write", source: func(t *testing.T) string {
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			return installed(t, dir)
		}, want: []string{"directory writable by its group or others", "chmod go-w"}},
		{name: "directory", source: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), Name)
			os.Mkdir(p, 0o755)
			return p
		}, want: []string{"not a regular file"}, as: new(*MissingError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName), Expect: tc.expect}
			_, err := p.Pin(t.Context(), tc.source(t), false)
			if err == nil {
				t.Fatal("pinned; want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.as != nil && !errors.As(err, tc.as) {
				t.Errorf("error %T is not %T", err, tc.as)
			}
			if ents, _ := os.ReadDir(p.Dir); len(ents) != 0 {
				t.Errorf("a refused worker left %d files in %s", len(ents), p.Dir)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	real := t.TempDir()
	exe := filepath.Join(real, "agora")
	os.WriteFile(exe, []byte("x"), 0o755)
	onPath := t.TempDir()
	link := filepath.Join(onPath, "agora")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	got, err := Locate(link, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(real, Name); got != want {
		t.Errorf("Locate(%s) = %s, want %s (beside the real executable)", link, got, want)
	}
	if got, _ := Locate(link, "/opt/agora/agora-worker"); got != "/opt/agora/agora-worker" {
		t.Errorf("configured: got %s", got)
	}
	if _, err := Locate(link, "relative/agora-worker"); err == nil {
		t.Error("a relative worker.binary was accepted")
	}
}

// Many dispatches start at once on a fresh AGORA_HOME: each pins and runs the worker at once.
// None may find the copy busy (ETXTBSY: a sibling's fork holding the copy open for writing)
// or half written. Failed before the pins were serialized and written under ForkLock: exit
// 126 and "worker exited 1" in TestDispatch_Concurrent100.
func TestPin_ConcurrentPinAndRun(t *testing.T) {
	src := installed(t, t.TempDir())
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	const n = 24
	errs := make(chan error, n)
	for range n {
		go func() {
			b, err := p.Pin(t.Context(), src, false)
			if err != nil {
				errs <- err
				return
			}
			// An unknown command line: the worker answers with its usage, exit 2.
			out, err := exec.Command(b.Path, "--usage").CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "agora-worker runs inside") {
				errs <- fmt.Errorf("run the pinned copy: %v: %s", err, out)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if ents, _ := os.ReadDir(p.Dir); len(ents) != 2 { // the copy and index.json
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want one copy and the index", p.Dir, names)
	}
}

// TestPin_RacingProcessesKeepTheFirstCopy: every dispatch is supervised by its own process, so
// the first dispatches of a new worker pin it in several processes at once, each finding no
// copy yet. The one that writes second must not replace the copy the first one's sandbox is
// binding: bwrap's bind of the unlinked file failed "No such file or directory", and the
// dispatch worker-failed (TestServe_FanOutRefused in CI, failed before with a rename). A copy
// at the name holding other bytes is replaced.
func TestPin_RacingProcessesKeepTheFirstCopy(t *testing.T) {
	src := installed(t, t.TempDir())
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	first := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	pinned, err := first.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(pinned.Path) // what a sandbox's bind holds
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before, _ := held.Stat()

	// The second process checked for a copy before the first linked it, then writes.
	second := &Pinner{Dir: first.Dir}
	id, _, err := second.writeCopy(pinned.Path, digest, b)
	if err != nil {
		t.Fatal(err)
	}
	now, err := os.Stat(pinned.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(now, before) || id != identify(before) {
		t.Fatalf("the second writer replaced the copy a sandbox holds (inode %v -> %v)", before.Sys(), now.Sys())
	}
	if ents, _ := os.ReadDir(first.Dir); len(ents) != 2 { // the copy and index.json: no temporary left
		t.Errorf("%s holds %d entries, want the copy and the index", first.Dir, len(ents))
	}

	// Other bytes under the digest's name (tampered with): replaced by the worker's.
	if err := os.Chmod(pinned.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned.Path, []byte("#!/bin/sh\necho pwned\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	if _, _, err := second.writeCopy(pinned.Path, digest, b); err != nil {
		t.Fatal(err)
	}
	if got := sumFile(t, pinned.Path); got != digest {
		t.Errorf("a tampered copy was kept: sha256 %s, want %s", got, digest)
	}
}

// TestPin_FreshPinIsTakenAsPinnedNext: the identity a fresh pin records for its copy is the
// copy's identity once the pin is done, so the next dispatch takes it with two stat calls
// instead of reading and hashing the worker again (the unlink of the temporary
// name changed the copy's ctime after it was recorded, and the second dispatch of every
// new worker build re-read it).
func TestPin_FreshPinIsTakenAsPinnedNext(t *testing.T) {
	src := installed(t, t.TempDir())
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	b, err := p.Pin(t.Context(), src, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := p.pinned(src, identify(st))
	if !ok || got != b {
		e, _ := p.lookup(src)
		cst, _ := os.Stat(b.Path)
		t.Fatalf("after a fresh pin the pin is not taken (ok %v): recorded copy %+v, copy now %+v", ok, e.Copy, identify(cst))
	}
}

// The attack on the pin a fresh pin now leaves in the index (before, the second
// dispatch always read the worker again): the copy is rewritten at once after its pin, in
// place, same size, its mtime set back. Only the ctime tells, and it must: every such
// rewrite is pinned again and the bound copy holds the worker's bytes.
func TestPin_CopyRewrittenAtOnceAfterAFreshPinIsPinnedAgain(t *testing.T) {
	src := installed(t, t.TempDir())
	for i := range 20 {
		p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
		b, err := p.Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(b.Path, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(b.Path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("#!/bin/sh\necho pwned\n"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chmod(b.Path, 0o555); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(b.Path, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		again, err := p.Pin(t.Context(), src, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := sumFile(t, again.Path); got != b.SHA256 {
			t.Fatalf("round %d: the copy rewritten after its pin is bound as it is (hashes %s, want %s)", i, got, b.SHA256)
		}
	}
}

// TestExecThere: only a name with nothing at it is passed over; a link to nothing and a name
// that cannot be looked at are there, so the pin's checks refuse them rather than the
// dispatcher quietly binding the other worker.
func TestExecThere(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{filepath.Join(dir, "absent"), false},
		{file, true},
		{dangling, true},
		{filepath.Join(file, ExecName), true}, // ENOTDIR: not "nothing there"
	} {
		if got := ExecThere(c.path); got != c.want {
			t.Errorf("ExecThere(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}
