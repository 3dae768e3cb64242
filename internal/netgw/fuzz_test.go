package netgw

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// FuzzParseRoute: whatever the path, a parsed route has a valid dispatch id and names that
// keep to their alphabets (nothing that could leave a directory).
func FuzzParseRoute(f *testing.F) {
	for _, s := range []string{
		remote.RoutePrefix + "01ABC/session",
		remote.RoutePrefix + "01ABC/mounts/workspace",
		remote.RoutePrefix + "01ABC/files/0",
		remote.RoutePrefix + "01ABC/streams/stdout",
		remote.RoutePrefix + "01ABC/sockets/gateway/gateway.sock",
		remote.RoutePrefix + "../x/session",
		remote.RoutePrefix + "01ABC/sockets/gateway/..",
		remote.RoutePrefix + "01ABC/files/01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := parseRoute(p)
		if err != nil {
			return
		}
		if !wire.ValidDispatchID(r.dispatch) {
			t.Fatalf("dispatch %q accepted", r.dispatch)
		}
		for _, s := range []string{r.name, r.socket} {
			if strings.ContainsAny(s, "/%\\\x00") || s == ".." || s == "." {
				t.Fatalf("name %q accepted", s)
			}
		}
		if r.index < 0 || r.index >= maxFiles {
			t.Fatalf("index %d accepted", r.index)
		}
	})
}

// FuzzExtractUpload: whatever the tar, extraction writes only regular files (one link, mode
// 0600) and directories (0700) beneath the destination, or nothing at all.
func FuzzExtractUpload(f *testing.F) {
	seed := func(entries ...tarEntry) []byte { return tarOf(f, entries...) }
	f.Add(seed(tarEntry{name: "result.json", body: "{}"}, tarEntry{name: "outputs/a", body: "a"}))
	f.Add(seed(tarEntry{name: "x", link: "/etc", typ: tar.TypeSymlink}, tarEntry{name: "x/y", body: "1"}))
	f.Add(seed(tarEntry{name: "../a", body: "1"}))
	f.Add(seed(tarEntry{name: "a", body: "1"}, tarEntry{name: "b", link: "a", typ: tar.TypeLink}))
	f.Add(seed(tarEntry{name: "d/", typ: tar.TypeDir}, tarEntry{name: "d/f", body: "1"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "out")
		if err := os.Mkdir(dst, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := extractUpload(bytes.NewReader(b), dst, uploadCaps{bytes: 1 << 20, entries: 64})
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("beside the out dir: %v", ents)
		}
		var n int
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, werr error) error {
			if werr != nil || p == dst {
				return werr
			}
			n++
			fi, _ := os.Lstat(p)
			switch {
			case fi.IsDir():
				if fi.Mode().Perm() != 0o700 {
					t.Fatalf("%s: dir mode %v", p, fi.Mode())
				}
			case fi.Mode().IsRegular():
				if fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: file mode %v", p, fi.Mode())
				}
			default:
				t.Fatalf("%s: a %v", p, fi.Mode().Type())
			}
			return nil
		})
		if err != nil && n > 0 {
			t.Fatalf("refused (%v) but %d entries were written", err, n)
		}
	})
}

// FuzzParseUploadMark: a mark is read back exactly as it was written, or refused; nothing
// else parses.
func FuzzParseUploadMark(f *testing.F) {
	f.Add([]byte("refused\n"))
	f.Add(uploadMark{SHA256: strings.Repeat("ab", 32), Size: 1024}.encode())
	f.Add([]byte("stored " + strings.Repeat("AB", 32) + " 1\n"))
	f.Add(uploadMark{Placing: true, SHA256: strings.Repeat("cd", 32), Size: 7}.encode())
	f.Add([]byte("stored " + strings.Repeat("ab", 32) + " 01\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseUploadMark(b)
		if err != nil {
			return
		}
		if got := m.encode(); !bytes.Equal(got, b) {
			t.Fatalf("%q parsed as %+v, which writes %q", b, m, got)
		}
		if !m.Refused && (m.Size < 0 || len(m.SHA256) != 64) {
			t.Fatalf("%q parsed as %+v", b, m)
		}
	})
}
