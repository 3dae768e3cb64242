package catalog_test

import (
	"archive/tar"
	"bytes"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
)

// FuzzReadArchive feeds arbitrary bytes to the archive reader: it must never panic, and
// whatever it accepts must be in canonical form, so writing the files back gives exactly the
// bytes read (one archive, one digest).
func FuzzReadArchive(f *testing.F) {
	seeds := [][]catalog.File{
		nil,
		{regular("a", 0o644, "x")},
		{regular("bin/run", 0o755, "#!/bin/sh\n"), {Path: "bin/link", Mode: 0o777, LinkTarget: "run"}, regular("z", 0o644, "")},
		{regular("capability.yaml", 0o644, "tools: [read_file]\n"), {Path: "d/up", Mode: 0o777, LinkTarget: "../capability.yaml"}},
		{regular("long/"+string(bytes.Repeat([]byte("n"), 150)), 0o644, "pax")},
	}
	for _, files := range seeds {
		data, err := catalog.Archive(files)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(rawTar(f, []tarEntry{{h: tar.Header{Name: "a", Format: tar.FormatGNU}, body: "x"}}))
	f.Add(rawTar(f, []tarEntry{{h: tar.Header{Name: "a", Format: tar.FormatUSTAR}, body: "x"}}))
	f.Add(rawTar(f, []tarEntry{{h: tar.Header{Name: "d/x", Typeflag: tar.TypeSymlink, Linkname: "..", Mode: 0o777}}}))
	f.Add([]byte("not a tar"))
	lim := catalog.Limits{MaxTotalSize: 1 << 20, MaxFiles: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := catalog.ReadArchive(data, lim)
		if err != nil {
			return
		}
		again, err := catalog.Archive(files)
		if err != nil {
			t.Fatalf("Archive of accepted files: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted archive is not canonical: %d bytes in, %d bytes re-archived", len(data), len(again))
		}
		if _, err := catalog.ReadArchive(again, lim); err != nil {
			t.Fatalf("re-reading the canonical archive: %v", err)
		}
	})
}
