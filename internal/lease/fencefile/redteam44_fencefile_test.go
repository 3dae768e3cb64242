package fencefile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// renewedFile is a leader's fence file at dir/name, renewed for valid from now.
func renewedFile(t *testing.T, dir, name string, valid time.Duration) (*fencefile.Writer, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := fencefile.Create(path, valid)
	if err != nil {
		t.Fatal(err)
	}
	w.Advance(bootNow(t) + int64(valid))
	return w, path
}

// A fence file whose deadline someone other than the leader and its children
// could move is no fence: a symlink at the path (to a file another keeps renewed), a file
// that group or others may write (a home made group- or world-writable: anyone there keeps a
// fenced supervisor committing by writing one word), or one of another user. The leader only
// ever renames its own 0600 file into place, so a child refuses each (fail closed) before it
// commits anything. Failed before (os.Open followed the link, the mode and owner were not
// read): the child committed under each.
func TestRedTeam44_FenceFileOthersCouldWriteRefused(t *testing.T) {
	const valid = 5 * time.Second
	cases := map[string]func(t *testing.T, dir string) string{
		"world-writable": func(t *testing.T, dir string) string {
			w, path := renewedFile(t, dir, "leader.fence", valid)
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
			return w.Env()
		},
		"group-writable": func(t *testing.T, dir string) string {
			w, path := renewedFile(t, dir, "leader.fence", valid)
			if err := os.Chmod(path, 0o620); err != nil {
				t.Fatal(err)
			}
			return w.Env()
		},
		"a symlink at the path": func(t *testing.T, dir string) string {
			w, path := renewedFile(t, dir, "real.fence", valid)
			link := filepath.Join(dir, "leader.fence")
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			// The same term and a renewed deadline: only the link is wrong.
			return strings.Replace(w.Env(), path, link, 1)
		},
		"another user's file": func(t *testing.T, dir string) string {
			if os.Geteuid() != 0 {
				t.Skip("SKIP: making a file of another user needs root")
			}
			w, path := renewedFile(t, dir, "leader.fence", valid)
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return w.Env()
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			env := mk(t, t.TempDir())
			p := startChild(t, env)
			if got := p.commit(); !strings.HasPrefix(got, "refused:") || !strings.Contains(got, "leader fence") {
				t.Errorf("a commit: %q, want refused by the leader fence", got)
			}
			if got := p.rows(); got != 0 {
				t.Errorf("%d rows committed under a fence others could move", got)
			}
		})
	}

	// The leader's own file, as Create leaves it, still opens.
	w, _ := renewedFile(t, t.TempDir(), "leader.fence", valid)
	if _, err := fencefile.Open(strings.TrimPrefix(w.Env(), fencefile.EnvName+"=")); err != nil {
		t.Errorf("the leader's own file: %v", err)
	}
}

// A fence file truncated under a child that mapped it (by hand, by
// a full disk's repair) made the child's next check fault (SIGBUS on the mapping's page) and
// the child died mid-commit, as one killed would. The check now fails closed without the
// crash: the child refuses that commit, stated, and lives to refuse the next. Failed before:
// the child answered nothing (dead of the fault).
func TestRedTeam44_FenceFileTruncatedUnderChild(t *testing.T) {
	w, path := renewedFile(t, t.TempDir(), "leader.fence", 5*time.Second)
	p := startChild(t, w.Env())
	if got := p.commit(); got != "ok" {
		t.Fatalf("a commit under the renewed fence: %q", got)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if got := p.commit(); !strings.HasPrefix(got, "refused:") || !strings.Contains(got, "fence file truncated") {
			t.Errorf("commit %d after the truncation: %q, want refused (fence file truncated)", i+1, got)
		}
	}
	if got := p.rows(); got != 1 {
		t.Errorf("%d rows, want the one before the truncation", got)
	}
}

// The same in this process: a Reader whose file is truncated under it answers ErrFenced from
// Check (the fault is recovered, not fatal), and so does the leader's own Writer.Check.
func TestFenceFile_TruncatedReaderCheckFailsClosed(t *testing.T) {
	w, path := renewedFile(t, t.TempDir(), "leader.fence", 5*time.Second)
	r, err := fencefile.Open(strings.TrimPrefix(w.Env(), fencefile.EnvName+"="))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Fatalf("check of the renewed file: %v", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func() error{"Reader": r.Check, "Writer": w.Check} {
		err := check()
		if !errors.Is(err, fencefile.ErrFenced) || !strings.Contains(err.Error(), "fence file truncated") {
			t.Errorf("%s.Check after the truncation: %v, want ErrFenced (fence file truncated)", name, err)
		}
	}
	// The file grown back (a leader rewriting it in place, which none does) reads again, so
	// the recovery left the process and the mapping usable.
	if err := os.Truncate(path, 64); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); !errors.Is(err, fencefile.ErrFenced) || strings.Contains(err.Error(), "truncated") {
		t.Errorf("check of the zeroed file: %v, want fenced for its header", err)
	}
}

// BenchmarkFenceFile_Check: the per-commit cost of a child's check of an open fence.
func BenchmarkFenceFile_Check(b *testing.B) {
	path := filepath.Join(b.TempDir(), "leader.fence")
	w, err := fencefile.Create(path, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	r, err := fencefile.Open(strings.TrimPrefix(w.Env(), fencefile.EnvName+"="))
	if err != nil {
		b.Fatal(err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		b.Fatal(err)
	}
	w.Advance(ts.Nano() + int64(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
