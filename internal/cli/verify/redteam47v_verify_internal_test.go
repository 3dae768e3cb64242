package verify

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// The 64 MiB threshold between reading a bundle whole and streaming it,
// from a file and from standard input, moved to the bundle's size.

// rt47vStreamed says whether rep is a streamed report: its passing entry rows are one
// counting row with no item.
func rt47vStreamed(rep *verify.Report) bool {
	for _, c := range rep.Checks {
		if c.Check == verify.CheckEntry && c.OK {
			return c.Item == ""
		}
	}
	return false
}

// TestRedTeam47V_StreamThreshold: a bundle of exactly streamFrom bytes is read whole, one
// byte more is streamed, from its path and from standard input alike, with the same verdict;
// and a forgery the stream must refuse (a 33-byte proof hash with a run of whitespace after
// it) fails streamed from the command.
func TestRedTeam47V_StreamThreshold(t *testing.T) {
	dir := "../../audit/verify/testdata/"
	data, err := os.ReadFile(dir + "bundle-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(dir + "audit-v3.pub")
	if err != nil {
		t.Fatal(err)
	}
	vo := verify.Options{Key: string(key)}
	const orig = `"U8XKeiMw7kyyaWp28QNtRLxUGXqoY4zeQ4QMJ/Hy3qE="`
	h, err := base64.StdEncoding.DecodeString(strings.Trim(orig, `"`))
	if err != nil || !bytes.Contains(data, []byte(orig)) {
		t.Fatalf("fixture: %v", err)
	}
	forged := bytes.Replace(data, []byte(orig),
		[]byte(`"`+base64.StdEncoding.EncodeToString(append(h, 0))+`"`+strings.Repeat(" ", 3<<20)), 1)
	defer func(prev int64) { streamFrom = prev }(streamFrom)
	for _, c := range []struct {
		name    string
		content []byte
		ok      bool
	}{{"valid", data, true}, {"33-byte proof hash", forged, false}} {
		path := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(path, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		size := int64(len(c.content))
		for _, from := range []int64{size, size - 1} {
			for _, stdin := range []bool{false, true} {
				streamFrom = from
				var rep *verify.Report
				if stdin {
					rep, err = verifyFile(bytes.NewReader(c.content), "-", vo)
				} else {
					rep, err = verifyFile(nil, path, vo)
				}
				if err != nil {
					t.Fatalf("%s from %d stdin %v: %v", c.name, from, stdin, err)
				}
				if rep.OK != c.ok {
					t.Fatalf("%s from %d stdin %v: ok %v, want %v: %+v", c.name, from, stdin, rep.OK, c.ok, rep.Failed())
				}
				if c.ok && rt47vStreamed(rep) != (from < size) {
					t.Fatalf("%s: a bundle of %d bytes with streamFrom %d (stdin %v): streamed %v", c.name, size, from, stdin, rt47vStreamed(rep))
				}
			}
		}
	}
}

// TestRedTeam47V_EndlessStdinStopsAtTheCap: standard input that never ends (a pipe from a
// stream) is copied to the temporary file only up to stdinSpoolCap; past it openBundle refuses,
// saying to pass the bundle's path, instead of filling TMPDIR.
func TestRedTeam47V_EndlessStdinStopsAtTheCap(t *testing.T) {
	defer func(from, spool int64) { streamFrom, stdinSpoolCap = from, spool }(streamFrom, stdinSpoolCap)
	streamFrom, stdinSpoolCap = 16, 1<<20
	t.Setenv("TMPDIR", t.TempDir())
	endless := io.MultiReader(strings.NewReader(`{"format":`), rt47vZeros{})
	_, f, _, err := openBundle(endless, "-")
	if f != nil {
		f.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "pass its path") || !strings.Contains(err.Error(), "past 1048576 bytes") {
		t.Fatalf("an endless standard input: %v; want a refusal past the cap that says to pass the path", err)
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// rt47vZeros reads spaces without end.
type rt47vZeros struct{}

func (rt47vZeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
