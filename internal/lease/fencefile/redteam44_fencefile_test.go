package fencefile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// Red team 44: a fence file whose deadline someone other than the leader and its children
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

// Red team 44: a fence file truncated under a child that mapped it (by hand, by a full disk's
// repair) faults the child's next check (SIGBUS on the mapping's page): the child dies before
// the commit, as one killed would, and commits nothing. It fails closed; this pins that no
// commit slips through on a fault.
func TestRedTeam44_FenceFileTruncatedUnderChild(t *testing.T) {
	w, path := renewedFile(t, t.TempDir(), "leader.fence", 5*time.Second)
	p := startChild(t, w.Env())
	if got := p.commit(); got != "ok" {
		t.Fatalf("a commit under the renewed fence: %q", got)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.in.Write([]byte("commit\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := p.out.ReadString('\n'); err == nil {
		t.Errorf("the child answered %q after its fence file was truncated; want it dead of the fault", strings.TrimSpace(l))
	}
	if got := p.rows(); got != 1 {
		t.Errorf("%d rows, want the one before the truncation", got)
	}
}
