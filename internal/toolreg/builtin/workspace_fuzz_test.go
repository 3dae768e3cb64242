package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

// FuzzWorkspacePath feeds any path string to the path check and the Root, as the file tools
// use them: each is either refused, or what it opens resolves (by the kernel's account,
// /proc/self/fd) inside the workspace; read_file and list_files never show what lies outside;
// write_file never changes anything outside.
func FuzzWorkspacePath(f *testing.F) {
	if _, err := os.Readlink("/proc/self/fd/0"); err != nil {
		f.Skip("SKIP: /proc/self/fd is not available to check where a file descriptor points")
	}
	for _, seed := range []string{
		"README.md", "../../etc/passwd", "/etc/passwd", "etc/passwd", "out/secret.txt", "outfile",
		"abs/secret.txt", "src/../README.md", "src/inner-link", ".", "..", "a/b/../../..", "src//main.go",
		"./out/../README.md", "etc/../README.md", "\x00", "src/inner-link/..", "out/../../outside",
	} {
		f.Add(seed)
	}
	fx := newFixture(f, grant.Set{})
	ws := workspace{dir: fx.ws}
	wsReal, err := filepath.EvalSymlinks(fx.ws)
	mustDo(f, err)
	outsideBefore := treeHash(f, fx.outside)

	f.Fuzz(func(t *testing.T, p string) {
		name, err := clean("fuzz", p)
		if err != nil {
			var de *toolreg.DeniedError
			if !errors.As(err, &de) || de.Reason != ReasonOutsideWorkspace {
				t.Fatalf("clean(%q) error %v is not a refusal", p, err)
			}
			return
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			t.Fatalf("clean(%q) = %q, which is not local", p, name)
		}
		root, err := ws.open("fuzz")
		mustDo(t, err)
		defer root.Close()
		if fd, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			target, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd.Fd())))
			fd.Close()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if target != wsReal && !strings.HasPrefix(target, wsReal+"/") {
				t.Fatalf("path %q opened %s, outside the workspace %s", p, target, wsReal)
			}
		}

		if res, err := ws.read(p, 0, 0); err == nil && strings.Contains(res.Content, outsideMarker) {
			t.Fatalf("read_file %q showed the file outside the workspace", p)
		}
		if res, err := ws.list(t.Context(), p, false); err == nil {
			// Every entry listed exists in the workspace (the fuzzer's writes add entries, so
			// the check is membership, not a fixed listing).
			for _, line := range strings.Split(res.Content, "\n") {
				if line == "[empty directory]" || strings.HasPrefix(line, "[listing capped") {
					continue
				}
				entry := strings.TrimSuffix(strings.TrimSuffix(line, "/"), "@")
				if strings.HasPrefix(entry, `"`) {
					if entry, err = strconv.Unquote(entry); err != nil {
						t.Fatalf("list_files %q: line %q is neither a plain nor a quoted name", p, line)
					}
				}
				if _, err := root.Lstat(entry); err != nil {
					t.Fatalf("list_files %q listed %q, which is not in the workspace: %v", p, line, err)
				}
			}
		}
		if _, err := ws.write(p, "fuzz"); err == nil {
			if _, err := root.Stat(name); err != nil {
				t.Fatalf("write_file %q succeeded, but %q is not in the workspace: %v", p, name, err)
			}
		}
		if treeHash(t, fx.outside) != outsideBefore {
			t.Fatalf("path %q changed the directory outside the workspace", p)
		}
	})
}
