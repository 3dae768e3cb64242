package catalog_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
)

var bigLimits = catalog.Limits{MaxTotalSize: 50 << 20, MaxFiles: catalog.DefaultMaxFiles}

// entry describes one thing to create in a test directory: a file (with mode), a symlink
// (link != "") or a directory (dir).
type entry struct {
	path string
	data string
	mode fs.FileMode
	link string
	dir  bool
}

func makeTree(t testing.TB, root string, entries []entry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(root, filepath.FromSlash(e.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.dir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case e.link != "":
			if err := os.Symlink(e.link, p); err != nil {
				t.Fatal(err)
			}
		default:
			mode := e.mode
			if mode == 0 {
				mode = 0o644
			}
			if err := os.WriteFile(p, []byte(e.data), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil { // WriteFile obeys the umask
				t.Fatal(err)
			}
		}
	}
}

func sampleEntries() []entry {
	return []entry{
		{path: "capability.yaml", data: "tools: [read_file]\nsetup: bin/setup.sh\n"},
		{path: "bin/setup.sh", data: "#!/bin/sh\necho hi\n", mode: 0o700},
		{path: "bin/tool", data: "\x7fELF binary-ish \x00\x01", mode: 0o511},
		{path: "docs/readme.md", data: "# readme\n", mode: 0o600},
		{path: "docs/empty", data: ""},
		{path: "docs/link-to-readme", link: "readme.md"},
		{path: "docs/up", link: "../bin/setup.sh"},
		{path: "emptydir", dir: true},
		{path: "a b/ünïcode.txt", data: "spaces and unicode in paths\n", mode: 0o664},
	}
}

func archiveDir(t testing.TB, dir string) ([]catalog.File, []byte) {
	t.Helper()
	files, err := catalog.ReadDir(dir, bigLimits)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	data, err := catalog.Archive(files)
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	return files, data
}

func TestReadDir_Files(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, sampleEntries())
	files, _ := archiveDir(t, dir)
	want := []catalog.File{
		regular("a b/ünïcode.txt", 0o644, "spaces and unicode in paths\n"),
		regular("bin/setup.sh", 0o755, "#!/bin/sh\necho hi\n"),
		regular("bin/tool", 0o755, "\x7fELF binary-ish \x00\x01"),
		regular("capability.yaml", 0o644, "tools: [read_file]\nsetup: bin/setup.sh\n"),
		regular("docs/empty", 0o644, ""),
		{Path: "docs/link-to-readme", Mode: 0o777, LinkTarget: "readme.md"},
		regular("docs/readme.md", 0o644, "# readme\n"),
		{Path: "docs/up", Mode: 0o777, LinkTarget: "../bin/setup.sh"},
	}
	if diff := cmp.Diff(want, files, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
		t.Errorf("ReadDir mismatch (-want +got):\n%s", diff)
	}
}

func regular(p string, mode int64, data string) catalog.File {
	return catalog.File{Path: p, Mode: mode, Size: int64(len(data)), Data: []byte(data)}
}

func TestArchive_Deterministic(t *testing.T) {
	dir1 := t.TempDir()
	makeTree(t, dir1, sampleEntries())
	_, first := archiveDir(t, dir1)
	_, again := archiveDir(t, dir1)
	if !bytes.Equal(first, again) {
		t.Fatalf("archiving the same directory twice gave different bytes")
	}

	// A copy made under another umask, created in reverse order, with other times and
	// owners, and with different non-exec permission bits, must give identical bytes.
	old := syscall.Umask(0o077)
	dir2 := t.TempDir()
	entries := sampleEntries()
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	for i := range entries {
		switch entries[i].mode {
		case 0o700:
			entries[i].mode = 0o755
		case 0o600:
			entries[i].mode = 0o444
		}
	}
	makeTree(t, dir2, entries)
	syscall.Umask(old)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	filepath.WalkDir(dir2, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			os.Chtimes(p, past, past)
		}
		os.Lchown(p, 1234, 5678)
		return nil
	})
	_, second := archiveDir(t, dir2)
	if !bytes.Equal(first, second) {
		t.Errorf("a copy with other times, owners and umask archived differently")
	}
	if digest.Sum(first) != digest.Sum(second) {
		t.Errorf("digests differ: %s vs %s", digest.Sum(first), digest.Sum(second))
	}

	// Changing a file's exec bit or content changes the bytes.
	if err := os.Chmod(filepath.Join(dir2, "docs", "readme.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, third := archiveDir(t, dir2); bytes.Equal(first, third) {
		t.Errorf("an exec bit change did not change the archive")
	}
}

func TestArchive_Headers(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, sampleEntries())
	_, data := archiveDir(t, dir)
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: header not normalised: %+v", h.Name, h)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			if h.Mode != 0o644 && h.Mode != 0o755 {
				t.Errorf("%s: mode %o", h.Name, h.Mode)
			}
		case tar.TypeSymlink:
		default:
			t.Errorf("%s: type %q", h.Name, h.Typeflag)
		}
	}
}

func TestReadDir_SymlinkedRoot(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	makeTree(t, real, sampleEntries())
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, want := archiveDir(t, real)
	_, got := archiveDir(t, link)
	if !bytes.Equal(want, got) {
		t.Errorf("a capability given through a symlink to its directory archived differently (%d vs %d bytes)", len(got), len(want))
	}
}

func TestReadDir_Refuses(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		fifo    string
		want    string
	}{
		{"absolute symlink", []entry{{path: "l", link: "/etc/passwd"}}, "", `l: symlink to an absolute path ("/etc/passwd") is not allowed`},
		{"escaping symlink", []entry{{path: "l", link: "../outside"}}, "", `l: symlink points outside the capability ("../outside")`},
		{"symlink to parent", []entry{{path: "l", link: ".."}}, "", `l: symlink points outside the capability ("..")`},
		{"nested escaping symlink", []entry{{path: "a/b", link: "../../x"}}, "", `a/b: symlink points outside the capability ("../../x")`},
		{"escape hidden by a dir", []entry{{path: "a/b/c", link: "../d/../../../x"}}, "", `a/b/c: symlink points outside the capability`},
		{
			name: "escape through another symlink",
			entries: []entry{
				{path: "d/x", link: ".."},   // d/x is the root itself: allowed alone
				{path: "s", link: "d/x/.."}, // lexically "d", really the root's parent
			},
			want: `s: symlink target "d/x/.." passes through the symlink "d/x"`,
		},
		{"named pipe", nil, "pipe", "pipe: named pipe files are not allowed in a capability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			makeTree(t, dir, append([]entry{{path: "ok.txt", data: "fine"}}, tt.entries...))
			if tt.fifo != "" {
				if err := syscall.Mkfifo(filepath.Join(dir, tt.fifo), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files, err := catalog.ReadDir(dir, bigLimits)
			if err == nil {
				t.Fatalf("ReadDir = %d files, want an error containing %q", len(files), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadDir error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestReadDir_RefusesDevice(t *testing.T) {
	dir := t.TempDir()
	// A character device like /dev/null; creating one needs CAP_MKNOD.
	err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	if err != nil {
		t.Skipf("SKIP: cannot create a device node here (%v); named pipes cover the special-file path", err)
	}
	_, err = catalog.ReadDir(dir, bigLimits)
	if err == nil || !strings.Contains(err.Error(), "null: device files are not allowed") {
		t.Errorf("ReadDir with a device = %v, want a device refusal", err)
	}
}

func TestReadDir_NotADirectory(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "file")
	os.WriteFile(f, []byte("x"), 0o644)
	if _, err := catalog.ReadDir(f, bigLimits); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("ReadDir(file) = %v, want not a directory", err)
	}
	if _, err := catalog.ReadDir(filepath.Join(dir, "missing"), bigLimits); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir(missing) = %v, want ErrNotExist", err)
	}
}

func TestReadDir_SizeLimit(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, []entry{
		{path: "a.bin", data: strings.Repeat("a", 600)},
		{path: "b.bin", data: strings.Repeat("b", 600)},
		{path: "c.bin", data: strings.Repeat("c", 600)},
	})
	// A named pipe sorts after the files: reaching it would mean the walk went on past the
	// limit instead of stopping.
	if err := syscall.Mkfifo(filepath.Join(dir, "z.pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := catalog.ReadDir(dir, catalog.Limits{MaxTotalSize: 1000})
	var se *catalog.SizeError
	if !errors.As(err, &se) {
		t.Fatalf("ReadDir over the limit = %v, want a SizeError", err)
	}
	if diff := cmp.Diff(&catalog.SizeError{Size: 1800, Limit: 1000}, se); diff != "" {
		t.Errorf("SizeError mismatch (-want +got):\n%s", diff)
	}
	want := "capability is 1.8 KiB (1800 bytes), over the 1000 bytes limit (set catalog.capability_max_size in agora.yaml to raise it)"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if _, err := catalog.ReadDir(dir, catalog.Limits{MaxTotalSize: 1800}); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("ReadDir at exactly the limit = %v, want to walk on to the pipe", err)
	}
}

func TestSizeError_Error(t *testing.T) {
	got := (&catalog.SizeError{Size: 60 << 20, Limit: 50 << 20}).Error()
	want := "capability is 60.0 MiB (62914560 bytes), over the 50.0 MiB (52428800 bytes) limit (set catalog.capability_max_size in agora.yaml to raise it)"
	if got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestReadDir_MaxFiles(t *testing.T) {
	dir := t.TempDir()
	var es []entry
	for i := range 4 {
		es = append(es, entry{path: fmt.Sprintf("f%d", i), data: "x"})
	}
	makeTree(t, dir, es)
	if _, err := catalog.ReadDir(dir, catalog.Limits{MaxTotalSize: 1 << 20, MaxFiles: 3}); err == nil ||
		!strings.Contains(err.Error(), "more than 3 files") {
		t.Errorf("ReadDir with 4 files, limit 3 = %v, want a file count refusal", err)
	}
	if files, err := catalog.ReadDir(dir, catalog.Limits{MaxTotalSize: 1 << 20, MaxFiles: 4}); err != nil || len(files) != 4 {
		t.Errorf("ReadDir with 4 files, limit 4 = %d, %v", len(files), err)
	}
}

func TestReadArchive_RoundTrip(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, sampleEntries())
	files, data := archiveDir(t, dir)
	got, err := catalog.ReadArchive(data, bigLimits)
	if err != nil {
		t.Fatalf("ReadArchive: %v", err)
	}
	if diff := cmp.Diff(files, got, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	again, err := catalog.Archive(got)
	if err != nil || !bytes.Equal(again, data) {
		t.Errorf("re-archiving what ReadArchive returned gave other bytes (%v)", err)
	}
	// An empty capability is a valid archive too.
	empty, err := catalog.Archive(nil)
	if err != nil {
		t.Fatal(err)
	}
	if files, err := catalog.ReadArchive(empty, bigLimits); err != nil || len(files) != 0 {
		t.Errorf("ReadArchive(empty) = %v, %v", files, err)
	}
	// Long paths need PAX records and still round-trip.
	long := []catalog.File{{Path: strings.Repeat("d/", 80) + strings.Repeat("n", 120), Mode: 0o644, Size: 1, Data: []byte("x")}}
	b, err := catalog.Archive(long)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := catalog.ReadArchive(b, bigLimits); err != nil || got[0].Path != long[0].Path {
		t.Errorf("long path round trip = %v, %v", got, err)
	}
}

// tarEntry is a raw tar header and body, for archives Archive would never write.
type tarEntry struct {
	h    tar.Header
	body string
}

func rawTar(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.h
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(0, 0)
		}
		if h.Format == 0 {
			h.Format = tar.FormatPAX
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("WriteHeader %s: %v", h.Name, err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadArchive_Refuses(t *testing.T) {
	valid := rawTar(t, []tarEntry{{h: tar.Header{Name: "a"}, body: "x"}})
	truncated := rawTar(t, []tarEntry{{h: tar.Header{Name: "a"}, body: strings.Repeat("x", 2000)}})
	truncated = truncated[:512+1000]
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"out of order", rawTar(t, []tarEntry{{h: tar.Header{Name: "b"}, body: "1"}, {h: tar.Header{Name: "a"}, body: "2"}}), `"a" out of order or duplicated`},
		{"duplicate", rawTar(t, []tarEntry{{h: tar.Header{Name: "a"}, body: "1"}, {h: tar.Header{Name: "a"}, body: "2"}}), `"a" out of order or duplicated`},
		{"absolute path", rawTar(t, []tarEntry{{h: tar.Header{Name: "/etc/passwd"}, body: "x"}}), `invalid path "/etc/passwd"`},
		{"dot-dot path", rawTar(t, []tarEntry{{h: tar.Header{Name: "../x"}, body: "x"}}), `invalid path "../x"`},
		{"inner dot-dot", rawTar(t, []tarEntry{{h: tar.Header{Name: "a/../../x"}, body: "x"}}), `invalid path "a/../../x"`},
		{"unclean path", rawTar(t, []tarEntry{{h: tar.Header{Name: "a//b"}, body: "x"}}), `invalid path "a//b"`},
		{"dot path", rawTar(t, []tarEntry{{h: tar.Header{Name: "./a"}, body: "x"}}), `invalid path "./a"`},
		{"backslash", rawTar(t, []tarEntry{{h: tar.Header{Name: `a\b`}, body: "x"}}), `invalid path "a\\b"`},
		{"non-zero mtime", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", ModTime: time.Unix(1, 0)}, body: "x"}}), `"a" has a non-normalised header`},
		{"non-zero uid", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", Uid: 1000}, body: "x"}}), `"a" has a non-normalised header`},
		{"owner name", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", Uname: "root"}, body: "x"}}), `"a" has a non-normalised header`},
		{"odd mode", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", Mode: 0o4755}, body: "x"}}), `"a" has mode 4755`},
		{"hardlink", rawTar(t, []tarEntry{{h: tar.Header{Name: "a"}, body: "x"}, {h: tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}}}), `"b" has type "1"`},
		{"char device", rawTar(t, []tarEntry{{h: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}}), `"null" has type "3"`},
		{"fifo", rawTar(t, []tarEntry{{h: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}}), `"p" has type "6"`},
		{"directory", rawTar(t, []tarEntry{{h: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}}}), `invalid path "d/"`},
		{"directory without slash", rawTar(t, []tarEntry{{h: tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755}}}), `"d" has type "5"`},
		{"absolute symlink", rawTar(t, []tarEntry{{h: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777}}}), "symlink to an absolute path"},
		{"escaping symlink", rawTar(t, []tarEntry{{h: tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../x", Mode: 0o777}}}), "symlink points outside the capability"},
		{"chained escaping symlink", rawTar(t, []tarEntry{
			{h: tar.Header{Name: "d/x", Typeflag: tar.TypeSymlink, Linkname: "..", Mode: 0o777}},
			{h: tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "d/x/..", Mode: 0o777}},
		}), `passes through the symlink "d/x"`},
		{"symlink with odd mode", rawTar(t, []tarEntry{{h: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "a", Mode: 0o755}}}), `"l" has a non-normalised header`},
		{"both file and directory", rawTar(t, []tarEntry{{h: tar.Header{Name: "a"}, body: "x"}, {h: tar.Header{Name: "a/b"}, body: "y"}}), `"a" is both a file and a directory`},
		{"symlink and directory", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "b", Mode: 0o777}}, {h: tar.Header{Name: "a/c"}, body: "y"}}), `"a" is both a file and a directory`},
		{"truncated data", truncated, "truncated"},
		{"garbage", []byte("this is not a tar archive at all, just some bytes that go on for a while......." + strings.Repeat(".", 600)), "read capability archive"},
		{"trailing data", append(append([]byte{}, valid...), "junk"...), "not in canonical form"},
		{"gnu format", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", Format: tar.FormatGNU}, body: "x"}}), "not in canonical form"},
		{"extra pax record", rawTar(t, []tarEntry{{h: tar.Header{Name: "a", PAXRecords: map[string]string{"comment": "hi"}}, body: "x"}}), "not in canonical form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := catalog.ReadArchive(tt.data, bigLimits)
			if err == nil {
				t.Fatalf("ReadArchive = %d files, want an error containing %q", len(files), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadArchive error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestReadArchive_Limits(t *testing.T) {
	data, err := catalog.Archive([]catalog.File{
		{Path: "a", Mode: 0o644, Data: bytes.Repeat([]byte("a"), 600)},
		{Path: "b", Mode: 0o644, Data: bytes.Repeat([]byte("b"), 600)},
		{Path: "c", Mode: 0o644, Data: bytes.Repeat([]byte("c"), 600)},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = catalog.ReadArchive(data, catalog.Limits{MaxTotalSize: 1000})
	var se *catalog.SizeError
	if !errors.As(err, &se) || se.Limit != 1000 || se.Size != 1200 {
		t.Errorf("ReadArchive over the size limit = %v, want a SizeError at 1200 of 1000 (stopping at the second file)", err)
	}
	if _, err := catalog.ReadArchive(data, catalog.Limits{MaxTotalSize: 1 << 20, MaxFiles: 2}); err == nil ||
		!strings.Contains(err.Error(), "more than 2 files") {
		t.Errorf("ReadArchive over the file limit = %v", err)
	}
	if files, err := catalog.ReadArchive(data, catalog.Limits{MaxTotalSize: 1800, MaxFiles: 3}); err != nil || len(files) != 3 {
		t.Errorf("ReadArchive at the limits = %d files, %v", len(files), err)
	}
}

func TestArchive_RefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", ".", "/abs", "../up", "a/../b", "a/", `a\b`, "a\x00b"} {
		if _, err := catalog.Archive([]catalog.File{{Path: p, Mode: 0o644}}); err == nil {
			t.Errorf("Archive accepted path %q", p)
		}
	}
}
