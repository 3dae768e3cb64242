package netgw

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// exportDisk exports l with the target's disk limit set to disk bytes.
func (g *gw) exportDisk(t testing.TB, l *layout, disk int64) *remote.Session {
	t.Helper()
	spec := l.spec(t)
	spec.Limits.Disk = disk
	s, err := g.reg.Export(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// putOut uploads body as l's out mount and returns the status and message.
func (g *gw) putOut(t testing.TB, l *layout, s *remote.Session, body []byte) (int, string) {
	t.Helper()
	return g.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(body))
}

// assertOutUntouched fails unless l's out directory holds only the file "before".
func assertOutUntouched(t *testing.T, l *layout) {
	t.Helper()
	ents, _ := os.ReadDir(l.out)
	if len(ents) != 1 || ents[0].Name() != "before" {
		t.Errorf("out dir changed by a refused upload: %v", ents)
	}
}

// TestUpload_CappedByTargetDisk: the upload cap is the target's
// disk, not the gateway-wide 2 GiB.
func TestUpload_CappedByTargetDisk(t *testing.T) {
	const disk = 1 << 20
	g := startGateway(t)
	body := tarOf(t, tarEntry{name: "result.json", body: "{}"}, tarEntry{name: "big", body: strings.Repeat("x", disk+disk/2)})

	small := stageLayout(t, "01DISKSMALL")
	must(t, os.WriteFile(filepath.Join(small.out, "before"), []byte("B"), 0o600))
	code, msg := g.putOut(t, small, g.exportDisk(t, small, disk), body)
	if code != 422 || !strings.Contains(msg, "over the 1048576 byte limit") {
		t.Errorf("1.5 MiB to a 1 MiB disk: %d %q, want 422 over the 1048576 byte limit", code, msg)
	}
	assertOutUntouched(t, small)

	// The same upload fits a session without a disk limit (the server's 2 GiB): the cap above
	// is the target's.
	free := stageLayout(t, "01DISKDEFAULT")
	if code, msg := g.putOut(t, free, g.export(t, free), body); code != 204 {
		t.Errorf("1.5 MiB with no disk limit: %d %q, want 204", code, msg)
	}
	// A server cap lower than the session's wins. The file is only 128 KiB over the cap: what
	// the refusal leaves unread must stay under what net/http drains (256 KiB) before it
	// answers, or the client sees its write reset instead of the 422 (a flake under -race).
	g.srv.MaxUploadBytes = disk / 2
	low := stageLayout(t, "01DISKSERVER")
	if code, msg := g.putOut(t, low, g.exportDisk(t, low, disk), tarOf(t, tarEntry{name: "f", body: strings.Repeat("x", disk*5/8)})); code != 422 {
		t.Errorf("over the server's cap, under the session's: %d %q, want 422", code, msg)
	}
}

// sparseTar makes a tar of one sparse file "big" of size bytes (a byte at its end, a hole
// before) with GNU tar in format (posix: PAX sparse; gnu: the old GNU sparse type).
func sparseTar(t *testing.T, size int64, format string) []byte {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("SKIP: GNU tar is not installed; it makes the sparse archives this test sends")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	must(t, err)
	_, err = f.WriteAt([]byte("x"), size-1)
	must(t, err)
	must(t, f.Close())
	out := filepath.Join(t.TempDir(), "sparse.tar")
	cmd := exec.Command("tar", "--sparse", "--format="+format, "-C", dir, "-cf", out, "big")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	must(t, err)
	if len(b) > 64<<10 {
		t.Fatalf("the tar of a %d-byte sparse file is %d bytes: tar did not encode it sparse", size, len(b))
	}
	return b
}

// TestUpload_SparseCountsLogicalSize: a sparse file costs the pod nothing, but its holes are
// written out on the host, so the cap counts its logical size; the old GNU sparse type is
// refused outright, and a sparse file within the cap is written whole (no hole left).
func TestUpload_SparseCountsLogicalSize(t *testing.T) {
	const disk = 1 << 20
	g := startGateway(t)

	over := stageLayout(t, "01SPARSEOVER")
	must(t, os.WriteFile(filepath.Join(over.out, "before"), []byte("B"), 0o600))
	code, msg := g.putOut(t, over, g.exportDisk(t, over, disk), sparseTar(t, 4*disk, "posix"))
	if code != 422 || !strings.Contains(msg, "over the 1048576 byte limit") {
		t.Errorf("a 4 MiB sparse file to a 1 MiB disk: %d %q, want 422 over the 1048576 byte limit", code, msg)
	}
	assertOutUntouched(t, over)

	gnu := stageLayout(t, "01SPARSEGNU")
	must(t, os.WriteFile(filepath.Join(gnu.out, "before"), []byte("B"), 0o600))
	code, msg = g.putOut(t, gnu, g.exportDisk(t, gnu, disk), sparseTar(t, disk/2, "gnu"))
	if code != 422 || !strings.Contains(msg, "GNU sparse file") {
		t.Errorf("an old GNU sparse entry: %d %q, want 422 naming a GNU sparse file", code, msg)
	}
	assertOutUntouched(t, gnu)

	within := stageLayout(t, "01SPARSEWITHIN")
	if code, msg := g.putOut(t, within, g.exportDisk(t, within, disk), sparseTar(t, disk/2, "posix")); code != 204 {
		t.Fatalf("a 512 KiB sparse file to a 1 MiB disk: %d %q, want 204", code, msg)
	}
	b, err := os.ReadFile(filepath.Join(within.out, "big"))
	must(t, err)
	if len(b) != disk/2 || b[len(b)-1] != 'x' || bytes.Count(b, []byte{0}) != disk/2-1 {
		t.Errorf("the extracted sparse file: %d bytes, want %d zeros then x", len(b), disk/2)
	}
	fi, err := os.Stat(filepath.Join(within.out, "big"))
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Blocks*512 > disk {
		t.Errorf("the extracted file takes %d bytes on the host, over the %d byte cap", st.Blocks*512, disk)
	}
}
