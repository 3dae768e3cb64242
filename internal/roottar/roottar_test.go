package roottar

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tarEntry is what a test reads back of one entry.
type tarEntry struct {
	Type byte
	Mode int64
	Link string
	Body string
}

func readTar(t *testing.T, b []byte) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out[h.Name] = tarEntry{Type: h.Typeflag, Mode: h.Mode, Link: h.Linkname, Body: string(body)}
	}
}

// tree makes a directory holding a file, an executable, a subdirectory with a file, a
// symlink pointing out of the tree and a FIFO.
func tree(t *testing.T) (dir, outside string) {
	t.Helper()
	dir = t.TempDir()
	outside = filepath.Join(t.TempDir(), "host-only")
	must(t, os.WriteFile(outside, []byte("HOST-ONLY"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o700))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("bb"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dir, "out")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	return dir, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteDir: what each side's options put in the tar. A symlink is an entry of its own
// or left out, never followed; a FIFO is never content.
func TestWriteDir(t *testing.T) {
	dir, outside := tree(t)
	tests := []struct {
		name string
		o    Options
		want map[string]tarEntry
	}{
		{"the gateway's download", Options{Symlinks: true, Buffer: make([]byte, 4)}, map[string]tarEntry{
			"a.txt":     {Type: tar.TypeReg, Mode: 0o644, Body: "a"},
			"run.sh":    {Type: tar.TypeReg, Mode: 0o755, Body: "#!/bin/sh\n"},
			"sub/":      {Type: tar.TypeDir, Mode: 0o755},
			"sub/b.txt": {Type: tar.TypeReg, Mode: 0o644, Body: "bb"},
			"out":       {Type: tar.TypeSymlink, Mode: 0o777, Link: outside},
		}},
		{"the worker's upload", Options{SkipDenied: true, SkipChanged: true, DirMode: 0o700,
			FileMode: func(fs.FileMode) int64 { return 0o600 }}, map[string]tarEntry{
			"a.txt":     {Type: tar.TypeReg, Mode: 0o600, Body: "a"},
			"run.sh":    {Type: tar.TypeReg, Mode: 0o600, Body: "#!/bin/sh\n"},
			"sub/":      {Type: tar.TypeDir, Mode: 0o700},
			"sub/b.txt": {Type: tar.TypeReg, Mode: 0o600, Body: "bb"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteDir(&b, dir, tt.o); err != nil {
				t.Fatal(err)
			}
			got := readTar(t, b.Bytes())
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tar (-want +got):\n%s", diff)
			}
			if strings.Contains(b.String(), "HOST-ONLY") {
				t.Error("the tar holds the content behind a symlink")
			}
		})
	}
}

// TestWriteDir_Denied: what the walk may not read fails the tar, or is left out under
// SkipDenied (a directory's entry kept, read as empty). Root reads everything, so this needs
// another user.
func TestWriteDir_Denied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("SKIP: root may read a mode-000 file; run as another user to test the refusal")
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("x"), 0o000))
	must(t, os.Mkdir(filepath.Join(dir, "closed"), 0o000))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o700) })
	if err := WriteDir(io.Discard, dir, Options{}); err == nil {
		t.Error("an unreadable file did not fail the tar")
	}
	var b bytes.Buffer
	if err := WriteDir(&b, dir, Options{SkipDenied: true}); err != nil {
		t.Fatal(err)
	}
	got := readTar(t, b.Bytes())
	if _, ok := got["secret"]; ok {
		t.Error("the unreadable file is in the tar")
	}
	if _, ok := got["closed/"]; !ok {
		t.Error("the unlistable directory's entry is missing")
	}
}

// TestWriteFile_Shrank: a file that ends before the size its header promised fails the tar.
func TestWriteFile_Shrank(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(path, []byte("0123456789"), 0o644))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Truncate(path, 3))
	err = writeFile(tar.NewWriter(io.Discard), "f", f, fi, Options{})
	if err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Errorf("got %v, want the file shrank", err)
	}
}

// TestWriteSingle: a regular file is the tar's one entry; a FIFO at the path is refused at
// once, not waited on.
func TestWriteSingle(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("content"), 0o755))
	var b bytes.Buffer
	if err := WriteSingle(&b, "file", filepath.Join(dir, "f"), Options{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]tarEntry{"file": {Type: tar.TypeReg, Mode: 0o755, Body: "content"}}
	if diff := cmp.Diff(want, readTar(t, b.Bytes())); diff != "" {
		t.Errorf("tar (-want +got):\n%s", diff)
	}
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	if err := WriteSingle(io.Discard, "file", filepath.Join(dir, "fifo"), Options{}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: got %v, want ErrNotRegular", err)
	}
}
