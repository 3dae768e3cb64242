package workerbin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckBuild: whatever file sits where the worker should be, reading its build
// information never panics, and only cmd/agora-worker's is accepted.
func FuzzCheckBuild(f *testing.F) {
	b, err := os.ReadFile(workerBin)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:4096])
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Add([]byte("#!/bin/sh\necho hi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := checkBuild("/x/agora-worker", bytes.NewReader(data), Build{})
		var m *MissingError
		if err != nil && !errors.As(err, &m) {
			t.Fatalf("error %T (%v), want *MissingError", err, err)
		}
		if err == nil && got.String() == "" {
			t.Fatal("accepted without a build")
		}
	})
}

// FuzzIndex: a damaged or forged index.json never yields a pin whose digest is not 64
// lowercase hex digits (the digest names the copy's file: a "../" in it would bind another).
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"/usr/local/bin/agora-worker":{"sha256":"` + string(bytes.Repeat([]byte("a"), 64)) + `"}}`))
	f.Add([]byte(`{"/usr/local/bin/agora-worker":{"sha256":"../../../../usr/bin/sh"}}`))
	f.Add([]byte(`{"/usr/local/bin/agora-worker":{"sha256":"AAAA"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, indexFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		p := &Pinner{Dir: dir}
		if e, ok := p.lookup("/usr/local/bin/agora-worker"); ok && !validDigest(e.SHA256) {
			t.Fatalf("lookup returned digest %q", e.SHA256)
		}
	})
}
