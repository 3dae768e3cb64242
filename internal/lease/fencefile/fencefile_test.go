package fencefile_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/lease/fencefile"
	"github.com/agora-dev/agora/internal/store"
)

// childEnv, set, makes this test binary a child of a leader (see TestMain): it keeps the
// fence its environment names, as `agora dispatch supervise` does, and commits a row to the
// database the variable names for each line "commit" on stdin, answering "ok" or
// "refused: why".
const childEnv = "FENCEFILE_TEST_CHILD_DB"

func TestMain(m *testing.M) {
	if db := os.Getenv(childEnv); db != "" {
		os.Exit(child(db))
	}
	os.Exit(m.Run())
}

func child(path string) int {
	ctx := context.Background()
	// A home's databases are migrated by the serve that starts the child.
	db, err := store.Open(ctx, path, []store.Migration{{Name: "t", SQL: "CREATE TABLE t (n INTEGER)"}})
	if err != nil {
		fmt.Println("open:", err)
		return 2
	}
	defer db.Close()
	check, _, ok := fencefile.FromEnv()
	if !ok {
		fmt.Println("no fence in the environment")
		return 2
	}
	store.SetFence(check)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO t VALUES (1)")
			return err
		})
		if err != nil {
			fmt.Println("refused:", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Println("ok")
		}
	}
	return 0
}

// proc is a running child.
type proc struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	db  string
}

func startChild(t *testing.T, env string) *proc {
	t.Helper()
	db := filepath.Join(t.TempDir(), "agora.db")
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), childEnv+"="+db)
	if env != "" {
		c.Env = append(c.Env, env)
	}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); c.Wait() })
	return &proc{t: t, in: in, out: bufio.NewReader(out), db: db}
}

// commit asks the child to commit once and returns its answer.
func (p *proc) commit() string {
	p.t.Helper()
	if _, err := io.WriteString(p.in, "commit\n"); err != nil {
		p.t.Fatal(err)
	}
	l, err := p.out.ReadString('\n')
	if err != nil {
		p.t.Fatalf("the child said nothing: %v (%q)", err, l)
	}
	return strings.TrimSpace(l)
}

// rows is how many commits reached the child's database.
func (p *proc) rows() int {
	p.t.Helper()
	db, err := store.OpenReadOnly(context.Background(), p.db)
	if err != nil {
		p.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.SQL().QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

func bootNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestFenceFile_ChildRefusesAfterDeadline: a child of a leader commits while the leader
// renews, and once the leader stops renewing (paused, partitioned) the deadline passes and
// the child commits nothing more, though nothing told it; a shut fence refuses at once.
func TestFenceFile_ChildRefusesAfterDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.fence")
	const valid = time.Second
	w, err := fencefile.Create(path, valid)
	if err != nil {
		t.Fatal(err)
	}
	p := startChild(t, w.Env())
	if got := p.commit(); !strings.HasPrefix(got, "refused:") || !strings.Contains(got, "not held yet") {
		t.Errorf("a commit before the first renew: %q, want refused (not held yet)", got)
	}
	// Renewals keep it open well past one validity.
	for end := time.Now().Add(3 * valid); time.Now().Before(end); time.Sleep(valid / 6) {
		w.Advance(bootNow(t) + int64(valid))
		if got := p.commit(); got != "ok" {
			t.Fatalf("a commit while the leader renews: %q", got)
		}
	}
	n := p.rows()
	time.Sleep(valid + 100*time.Millisecond) // no renew: the leader is stopped
	if got := p.commit(); !strings.Contains(got, "not renewed in time") {
		t.Errorf("a commit after the deadline: %q, want refused (not renewed in time)", got)
	}
	w.Advance(bootNow(t) + int64(valid))
	if got := p.commit(); got != "ok" {
		t.Errorf("a commit after a late renew: %q", got)
	}
	w.Shut()
	w.Advance(bootNow(t) + int64(valid)) // a renew racing the Shut reopens nothing
	if got := p.commit(); !strings.Contains(got, "leadership ended") {
		t.Errorf("a commit after Shut: %q, want refused (leadership ended)", got)
	}
	if got := p.rows(); got != n+1 {
		t.Errorf("%d rows, want %d: a refused commit reached the database", got, n+1)
	}
}

// TestFenceFile_ChildFailsClosed: a child told of a fence it cannot trust commits nothing: the
// file missing, garbled (its header, or a deadline no renew could set), replaced by a newer
// term's, or the variable malformed.
func TestFenceFile_ChildFailsClosed(t *testing.T) {
	dir := t.TempDir()
	const valid = 5 * time.Second
	open := func(name string) (*fencefile.Writer, string) {
		path := filepath.Join(dir, name)
		w, err := fencefile.Create(path, valid)
		if err != nil {
			t.Fatal(err)
		}
		w.Advance(bootNow(t) + int64(valid))
		return w, path
	}
	patch := func(path string, off int64, b []byte) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]func() (env string, after func()){
		"missing": func() (string, func()) {
			w, path := open("missing")
			os.Remove(path)
			return w.Env(), nil
		},
		"magic garbled after start": func() (string, func()) {
			w, path := open("magic")
			return w.Env(), func() { patch(path, 0, []byte("garbage!")) }
		},
		"deadline garbled after start": func() (string, func()) {
			w, path := open("deadline")
			return w.Env(), func() { patch(path, 48, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) }
		},
		"truncated": func() (string, func()) {
			w, path := open("short")
			os.Truncate(path, 10)
			return w.Env(), nil
		},
		"a newer term's file": func() (string, func()) {
			// A child of the old term started after a new term replaced the file: the new
			// leader's renews are not its leader's.
			old, _ := open("term")
			open("term")
			return old.Env(), nil
		},
		"not a path": func() (string, func()) {
			w, _ := open("rel")
			env := w.Env()
			return env[:strings.Index(env, ":")+1] + "leader.fence", nil
		},
		"empty": func() (string, func()) { return fencefile.EnvName + "=", nil },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			env, after := mk()
			p := startChild(t, env)
			if after != nil {
				if got := p.commit(); got != "ok" {
					t.Fatalf("a commit before the file went bad: %q", got)
				}
				after()
			}
			if got := p.commit(); !strings.HasPrefix(got, "refused:") || !strings.Contains(got, "leader fence") {
				t.Errorf("a commit: %q, want refused by the leader fence", got)
			}
			want := 0
			if after != nil {
				want = 1
			}
			if got := p.rows(); got != want {
				t.Errorf("%d rows, want %d", got, want)
			}
		})
	}
}

// TestFenceFile_ChildEnv: a child's environment names the fence of its parent and no other:
// one inherited from elsewhere is replaced, and without a fence none is passed on.
func TestFenceFile_ChildEnv(t *testing.T) {
	base := []string{"PATH=/bin", fencefile.EnvName + "=00:/elsewhere"}
	defer fencefile.SetInherited("")()
	if got := fencefile.ChildEnv(base); len(got) != 1 || got[0] != "PATH=/bin" {
		t.Errorf("without a fence: %q", got)
	}
	w, err := fencefile.Create(filepath.Join(t.TempDir(), "f"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fencefile.SetInherited(w.Env())
	if got := fencefile.ChildEnv(base); len(got) != 2 || got[1] != w.Env() {
		t.Errorf("with a fence: %q, want PATH and %q", got, w.Env())
	}
}

// TestFenceFile_Open: what Open refuses, and that a closed but well-formed file opens (a
// child may start before its leader's first renew reaches the file).
func TestFenceFile_Open(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.fence")
	w, err := fencefile.Create(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.TrimPrefix(w.Env(), fencefile.EnvName+"=")
	r, err := fencefile.Open(env)
	if err != nil {
		t.Fatalf("open a never renewed file: %v", err)
	}
	if err := r.Check(); !errors.Is(err, fencefile.ErrFenced) {
		t.Errorf("check of a never renewed file: %v", err)
	}
	w.Advance(bootNow(t) + int64(time.Second))
	if err := r.Check(); err != nil {
		t.Errorf("check of a renewed file: %v", err)
	}
	other := strings.Replace(env, env[:2], map[bool]string{true: "ff", false: "00"}[env[:2] != "ff"], 1)
	if _, err := fencefile.Open(other); err == nil {
		t.Error("opened the file under another term")
	}
	if _, err := fencefile.Create(path, 2*time.Hour); err == nil {
		t.Error("created a file with a validity over an hour")
	}
}

// FuzzFenceFile_Parse: the parsers of the file and of the variable never panic, and a header they
// accept says what it holds.
func FuzzFenceFile_Parse(f *testing.F) {
	seed := filepath.Join(f.TempDir(), "seed")
	w, err := fencefile.Create(seed, time.Second)
	if err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, strings.TrimPrefix(w.Env(), fencefile.EnvName+"="))
	f.Add(make([]byte, 64), "00:/x")
	f.Fuzz(func(t *testing.T, b []byte, env string) {
		h, _, err := fencefile.ParseHeader(b)
		if err == nil && (len(b) != 64 || h.Valid <= 0 || h.Valid > time.Hour) {
			t.Errorf("accepted %x as %+v", b, h)
		}
		if _, p, err := fencefile.ParseEnv(env); err == nil && (!filepath.IsAbs(p) || filepath.Clean(p) != p) {
			t.Errorf("accepted path %q of %q", p, env)
		}
	})
}
