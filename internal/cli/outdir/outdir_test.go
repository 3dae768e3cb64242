package outdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// `agora orch patches --to DIR` wrote through a symbolic link already
// in DIR. These tests plant links and files where agora writes, and check that nothing is
// written through them and nothing outside DIR changes.

// planted is a directory the user named, with an outside directory a link could reach.
type planted struct {
	dir, outside string
}

func newPlanted(t *testing.T) planted {
	t.Helper()
	root := t.TempDir()
	p := planted{dir: filepath.Join(root, "review"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{p.dir, p.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(p.outside, "victim"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// outsideUnchanged fails t unless the outside directory holds exactly its victim, unchanged.
func (p planted) outsideUnchanged(t *testing.T) {
	t.Helper()
	es, err := os.ReadDir(p.outside)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "victim" {
		t.Errorf("outside holds %v, want only victim: something was written through a link", names)
	}
	if b, _ := os.ReadFile(filepath.Join(p.outside, "victim")); string(b) != "original" {
		t.Errorf("victim now holds %q: it was written through a link", b)
	}
}

func (p planted) symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(p.dir, name)); err != nil {
		t.Fatal(err)
	}
}

func TestOutDir_WriteFileRefusesWhatIsPlanted(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, p planted)
		rel   string
		want  string // in the error
	}{
		{"a link to a file outside", func(t *testing.T, p planted) {
			p.symlink(t, filepath.Join(p.outside, "victim"), "t1.patch")
		}, "t1.patch", "is a symbolic link"},
		{"a dangling link to a new file outside", func(t *testing.T, p planted) {
			p.symlink(t, filepath.Join(p.outside, "new"), "t1.patch")
		}, "t1.patch", "is a symbolic link"},
		{"a relative link out", func(t *testing.T, p planted) {
			p.symlink(t, "../outside/victim", "t1.patch")
		}, "t1.patch", "is a symbolic link"},
		{"a link to a file inside", func(t *testing.T, p planted) {
			os.WriteFile(filepath.Join(p.dir, "other"), []byte("mine"), 0o600)
			p.symlink(t, "other", "t1.patch")
		}, "t1.patch", "is a symbolic link"},
		{"a parent directory linked outside", func(t *testing.T, p planted) {
			p.symlink(t, p.outside, "a")
		}, "a/report.md", "is a symbolic link"},
		{"a dangling parent link", func(t *testing.T, p planted) {
			p.symlink(t, filepath.Join(p.outside, "made"), "a")
		}, "a/b/report.md", "is a symbolic link"},
		{"a parent that is a file", func(t *testing.T, p planted) {
			os.WriteFile(filepath.Join(p.dir, "a"), nil, 0o600)
		}, "a/report.md", "is not a directory"},
		{"a different file", func(t *testing.T, p planted) {
			os.WriteFile(filepath.Join(p.dir, "t1.patch"), []byte("someone else's"), 0o644)
		}, "t1.patch", "exists with other content"},
		{"a fifo", func(t *testing.T, p planted) {
			if err := syscall.Mkfifo(filepath.Join(p.dir, "t1.patch"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "t1.patch", "exists with other content"},
		{"a path leaving the directory", func(*testing.T, planted) {}, "../outside/victim", "leaves the directory"},
		{"an absolute path", func(*testing.T, planted) {}, "/etc/agora-should-not-exist", "leaves the directory"},
		{"an empty path", func(*testing.T, planted) {}, "", "leaves the directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlanted(t)
			tt.plant(t, p)
			before := snapshot(t, p.dir)
			d, err := Open(p.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = d.WriteFile(tt.rel, []byte("patch body"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("writeFile(%q) = %v, want an error saying %q", tt.rel, err, tt.want)
			}
			var oe *Error
			if tt.want != "leaves the directory" && (!errors.As(err, &oe) || oe.Hint() == "") {
				t.Errorf("error %v is not an outputError with a hint", err)
			}
			p.outsideUnchanged(t)
			if after := snapshot(t, p.dir); after != before {
				t.Errorf("the directory changed:\nbefore %s\nafter  %s", before, after)
			}
			if _, err := os.Lstat("/etc/agora-should-not-exist"); err == nil {
				t.Errorf("/etc/agora-should-not-exist was created")
			}
		})
	}
}

// snapshot lists every path under dir with its type, mode and size.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %v %d; ", rel, fi.Mode(), fi.Size())
		return nil
	})
	return b.String()
}

func TestOutDir_WriteFileModesAndRerun(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "new", "review")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	path, err := d.WriteFile("a/b/report.md", []byte("report"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "a", "b", "report.md"); path != want {
		t.Errorf("path = %q, want %q", path, want)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Dir(dir): 0o700 | os.ModeDir, dir: 0o700 | os.ModeDir,
		filepath.Join(dir, "a"): 0o700 | os.ModeDir, filepath.Join(dir, "a", "b"): 0o700 | os.ModeDir,
		path: 0o600,
	} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s is %v, want %v", p, fi.Mode(), want)
		}
	}
	// A rerun writing the same bytes succeeds and changes nothing; other bytes are refused.
	if _, err := d.WriteFile("a/b/report.md", []byte("report")); err != nil {
		t.Errorf("rerun with the same content: %v", err)
	}
	if _, err := d.WriteFile("a/b/report.md", []byte("other")); err == nil || !strings.Contains(err.Error(), "exists with other content") {
		t.Errorf("rerun with other content: %v, want refused", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "report" {
		t.Errorf("file holds %q after the refused rerun", b)
	}
}

func TestWriteOutFile(t *testing.T) {
	write := func(w io.Writer) error { _, err := io.WriteString(w, "bundle"); return err }
	for _, overwrite := range []bool{false, true} {
		t.Run(map[bool]string{false: "create", true: "overwrite"}[overwrite], func(t *testing.T) {
			p := newPlanted(t)
			// A new file is 0600.
			fresh := filepath.Join(p.dir, "fresh.json")
			if err := WriteFile(fresh, overwrite, write); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Lstat(fresh); fi.Mode() != 0o600 {
				t.Errorf("fresh file is %v, want 0600", fi.Mode())
			}
			for _, target := range []string{filepath.Join(p.outside, "victim"), filepath.Join(p.outside, "new")} {
				link := filepath.Join(p.dir, "bundle.json")
				os.Remove(link)
				p.symlink(t, target, "bundle.json")
				err := WriteFile(link, overwrite, write)
				p.outsideUnchanged(t)
				if !overwrite {
					if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
						t.Errorf("link to %s: %v, want refused", target, err)
					}
					continue
				}
				// Overwriting replaces the link itself with a new private file.
				fi, lerr := os.Lstat(link)
				if err != nil || lerr != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
					t.Errorf("overwrite a link to %s: err %v, now %v; want a new 0600 file", target, err, fi.Mode())
				}
			}
			existing := filepath.Join(p.dir, "old.json")
			os.WriteFile(existing, []byte("old"), 0o644)
			err := WriteFile(existing, overwrite, write)
			b, _ := os.ReadFile(existing)
			if !overwrite && (err == nil || string(b) != "old") {
				t.Errorf("existing file: %v, holds %q; want refused and unchanged", err, b)
			}
			if overwrite && (err != nil || string(b) != "bundle") {
				t.Errorf("existing file: %v, holds %q; want replaced", err, b)
			}
			// A failed write leaves nothing behind.
			failed := filepath.Join(p.dir, "failed.json")
			if err := WriteFile(failed, overwrite, func(io.Writer) error { return errors.New("boom") }); err == nil {
				t.Errorf("a failing writer: no error")
			}
			es, _ := os.ReadDir(p.dir)
			for _, e := range es {
				if strings.Contains(e.Name(), "failed") {
					t.Errorf("a failed write left %s", e.Name())
				}
			}
		})
	}
}

// FuzzOutDirWriteFile: whatever path an agent names its output, writeFile writes only a new
// regular 0600 file beneath the directory, at the path it returns, and never anything
// through the link planted there.
func FuzzOutDirWriteFile(f *testing.F) {
	for _, s := range []string{"report.md", "a/b/c", "link/x", "link", "../x", "/etc/x", "a/../link/x", "./a", "a//b", ".", "", "a/\x00", "dangling/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		p := newPlanted(t)
		p.symlink(t, p.outside, "link")
		p.symlink(t, filepath.Join(p.outside, "made"), "dangling")
		d, err := Open(p.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		path, err := d.WriteFile(rel, []byte("data"))
		p.outsideUnchanged(t)
		if err != nil {
			return
		}
		inner, rerr := filepath.Rel(p.dir, path)
		if rerr != nil || !filepath.IsLocal(inner) {
			t.Fatalf("writeFile(%q) wrote %q, outside %s", rel, path, p.dir)
		}
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("writeFile(%q) reported %q, which is %v (%v)", rel, path, fi, err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, []byte("data")) {
			t.Fatalf("%q holds %q", path, b)
		}
	})
}
