package remote

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract: whatever the tar, nothing is written outside the directory, and nothing but
// files, directories and symlinks inside it.
func FuzzExtract(f *testing.F) {
	f.Add(tarBytes(f, hdr("a", tar.TypeReg, "", "x"), hdr("d/", tar.TypeDir, "", ""), hdr("d/l", tar.TypeSymlink, "../a", "")))
	f.Add(tarBytes(f, hdr("l", tar.TypeSymlink, "/", ""), hdr("l/etc/x", tar.TypeReg, "", "x")))
	f.Add(tarBytes(f, hdr("l", tar.TypeSymlink, "..", ""), hdr("l/x", tar.TypeReg, "", "x")))
	f.Add(tarBytes(f, hdr("../x", tar.TypeReg, "", "x")))
	f.Add(tarBytes(f, hdr("h", tar.TypeLink, "/etc/passwd", "")))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "vol")
		Extract(bytes.NewReader(b), dst)
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("written beside the volume: %v", ents)
		}
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !strings.HasPrefix(p, dst) {
				t.Fatalf("walked out: %s", p)
			}
			switch d.Type() {
			case 0, fs.ModeDir, fs.ModeSymlink:
			default:
				t.Fatalf("%s: a %v", p, d.Type())
			}
			return nil
		})
	})
}

type entry struct {
	name, link, body string
	typ              byte
}

func hdr(name string, typ byte, link, body string) entry {
	return entry{name: name, typ: typ, link: link, body: body}
}

func tarBytes(tb testing.TB, entries ...entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return b.Bytes()
}
