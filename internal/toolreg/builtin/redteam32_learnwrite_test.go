package builtin

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// The agent, with the worker's uid, knows the scratch
// directory's name (the model reads it in write_file's answer) and prepares it before the
// next learned write, hoping the write lands in the workspace (the patch) or outside.

// TestRedTeam32_LearnWritePlantedLinksInScratch: symbolic links the agent made inside the
// scratch directory, at the first component of the path asked for, leading to the workspace,
// to the tree outside, or climbing out relatively: the write never lands through them.
func TestRedTeam32_LearnWritePlantedLinksInScratch(t *testing.T) {
	f := newLearnFixture(t)
	wsBefore, outsideBefore := treeHash(t, f.ws), treeHash(t, f.outside)
	s := f.scratch.Dir()
	mustDo(t, os.Symlink(f.ws, filepath.Join(s, "etc")))
	mustDo(t, os.Symlink(f.outside, filepath.Join(s, "agora")))
	mustDo(t, os.Symlink("..", filepath.Join(s, "home")))
	mustDo(t, os.Symlink(filepath.Join(f.ws, "README.md"), filepath.Join(s, "root")))
	for _, p := range []string{"/etc/README.md", "/etc/new.txt", "/agora/secret.txt", "/home/x", "/root"} {
		f.call(t, "write_file", map[string]any{"path": p, "content": "escaped"}) // refused or made in the scratch: never through a link
	}
	if treeHash(t, f.ws) != wsBefore || treeHash(t, f.outside) != outsideBefore {
		t.Error("a learned write landed through a link planted in the scratch directory")
	}
}

// TestRedTeam32_LearnWriteHardLinkInScratch: the agent hard-links a workspace file (and a
// file outside) into the scratch directory at the place a learned write of /etc/passwd
// goes. The kernel names the file opened by the scratch path, so a check by name passes; the
// write must not reach the workspace file (it would be in the patch, recorded only as a
// write of /etc/passwd that learn "made in a scratch directory") nor the file outside.
func TestRedTeam32_LearnWriteHardLinkInScratch(t *testing.T) {
	f := newLearnFixture(t)
	wsBefore, outsideBefore := treeHash(t, f.ws), treeHash(t, f.outside)
	etc := filepath.Join(f.scratch.Dir(), "etc")
	mustDo(t, os.Mkdir(etc, 0o755))
	if err := os.Link(filepath.Join(f.ws, "README.md"), filepath.Join(etc, "passwd")); err != nil {
		t.Skipf("SKIP: no hard link from the scratch to the workspace here: %v", err)
	}
	mustDo(t, os.Link(filepath.Join(f.outside, "secret.txt"), filepath.Join(etc, "shadow")))
	for _, p := range []string{"/etc/passwd", "/etc/shadow"} {
		f.call(t, "write_file", map[string]any{"path": p, "content": "PWNED"}) // refused, or made in a file of the scratch's own
	}
	if treeHash(t, f.ws) != wsBefore {
		b, _ := os.ReadFile(filepath.Join(f.ws, "README.md"))
		t.Errorf("a learned write of /etc/passwd changed the workspace through a hard link: README.md is %q", b)
	}
	if treeHash(t, f.outside) != outsideBefore {
		t.Error("a learned write changed a file outside through a hard link")
	}
}

// TestRedTeam32_LearnWriteRacesLinkSwap: while learned writes run, the agent swaps the
// scratch's etc between a directory and a link to the workspace (and to the tree outside),
// as fast as it can: no write lands in either.
func TestRedTeam32_LearnWriteRacesLinkSwap(t *testing.T) {
	f := newLearnFixture(t)
	wsBefore, outsideBefore := treeHash(t, f.ws), treeHash(t, f.outside)
	etc := filepath.Join(f.scratch.Dir(), "etc")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			to := f.ws
			if i%2 == 1 {
				to = f.outside
			}
			os.RemoveAll(etc)
			os.Symlink(to, etc)
			os.Remove(etc)
			os.Mkdir(etc, 0o755)
		}
	}()
	for range 200 {
		f.call(t, "write_file", map[string]any{"path": "/etc/new.txt", "content": "raced"})
		f.call(t, "write_file", map[string]any{"path": "/etc/README.md", "content": "raced"})
	}
	stop.Store(true)
	wg.Wait()
	if treeHash(t, f.ws) != wsBefore || treeHash(t, f.outside) != outsideBefore {
		t.Error("a learned write raced through a swapped link into the workspace or outside")
	}
}

// TestRedTeam32_LearnWriteAbsolutePathInsideWorkspace: a model that names a workspace file
// by its absolute path (models often do) is refused as in any dispatch ("give a path
// relative to the workspace root"); it must not be put on record as a write outside the
// workspace (suggest would list a workspace file as one "no grant allows"), nor diverted to
// the scratch directory while the model is told the file is outside.
func TestRedTeam32_LearnWriteAbsolutePathInsideWorkspace(t *testing.T) {
	f := newLearnFixture(t)
	for _, p := range []string{filepath.Join(f.ws, "README.md"), filepath.Join(f.ws, "src", "new.go"), f.ws + "/src/../docs/x.md"} {
		_, err := f.call(t, "write_file", map[string]any{"path": p, "content": "x"})
		if !isDenied(err, ReasonOutsideWorkspace) {
			t.Errorf("write_file %q: %v, want the plain refusal of an absolute path", p, err)
		}
	}
	if got := f.all(); len(got) != 0 {
		t.Errorf("workspace files named by absolute paths were recorded as writes outside the workspace: %+v", got)
	}
	if ents, _ := os.ReadDir(f.scratch.Dir()); len(ents) != 0 {
		t.Errorf("workspace files named by absolute paths were written to the scratch directory: %v", ents)
	}
}

// TestRedTeam32_ScratchWriteFileHardLink: claude's learned Write goes through
// Scratch.WriteFile, not write_file: the same hard link planted in the scratch (to a
// workspace file) is refused there too, and the workspace file is unchanged.
func TestRedTeam32_ScratchWriteFileHardLink(t *testing.T) {
	f := newLearnFixture(t)
	wsBefore := treeHash(t, f.ws)
	etc := filepath.Join(f.scratch.Dir(), "etc")
	mustDo(t, os.Mkdir(etc, 0o755))
	if err := os.Link(filepath.Join(f.ws, "README.md"), filepath.Join(etc, "hosts")); err != nil {
		t.Skipf("SKIP: no hard link from the scratch to the workspace here: %v", err)
	}
	if where, err := f.scratch.WriteFile("/etc/hosts", "PWNED"); err == nil {
		t.Errorf("claude's learned Write through a hard link was made at %s", where)
	}
	if treeHash(t, f.ws) != wsBefore {
		t.Error("claude's learned Write changed the workspace through a hard link")
	}
	// A fresh file of the scratch's own is still made.
	if _, err := f.scratch.WriteFile("/etc/fresh", "ok"); err != nil {
		t.Errorf("a fresh learned Write: %v", err)
	}
}
