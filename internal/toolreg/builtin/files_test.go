package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/toolreg"
)

func TestReadFile(t *testing.T) {
	f := newFixture(t, allTools)
	big := bytes.Repeat([]byte("0123456789abcdef"), (maxReadBytes+maxReadBytes/2)/16) // 1.5 MiB
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "big.txt"), big, 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "bin.dat"), []byte("ELF\x00\x01\x02"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "empty"), nil, 0o644))

	tests := []struct {
		name    string
		args    map[string]any
		want    string // exact content, or a prefix when wantPrefix
		prefix  bool
		wantErr string
	}{
		{name: "whole file", args: map[string]any{"path": "README.md"}, want: "# demo\nhello world\n"},
		{name: "dot segments inside", args: map[string]any{"path": "./src/../README.md"}, want: "# demo\nhello world\n"},
		{name: "symlink inside the workspace", args: map[string]any{"path": "src/inner-link"}, want: "# demo\nhello world\n"},
		{name: "offset and limit", args: map[string]any{"path": "README.md", "offset": 7, "limit": 5},
			want: "hello\n[truncated: bytes 7-12 of 19 shown; read on with offset 12]"},
		{name: "offset to the end", args: map[string]any{"path": "README.md", "offset": 13}, want: "world\n"},
		{name: "offset past the end", args: map[string]any{"path": "README.md", "offset": 100},
			want: "[offset 100 is at or past the end of the file (19 bytes)]"},
		{name: "empty file", args: map[string]any{"path": "empty"}, want: ""},
		{name: "capped at 1 MiB", args: map[string]any{"path": "big.txt"},
			want: string(big[:16]), prefix: true},
		{name: "binary", args: map[string]any{"path": "bin.dat"}, want: "[binary file: 6 bytes; not shown]"},
		{name: "directory", args: map[string]any{"path": "src"}, wantErr: "read_file: is a directory; use list_files"},
		{name: "missing", args: map[string]any{"path": "nope.txt"}, wantErr: "read_file: no such file or directory"},
		{name: "through a file", args: map[string]any{"path": "README.md/x"}, wantErr: "read_file: a component of the path is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.call(t, "read_file", tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %q, %v; want error %q", res.Content, err, tt.wantErr)
				}
				f.wantDecision(t, "read_file", toolreg.DecisionError, "tool error: "+tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.prefix && !strings.HasPrefix(res.Content, tt.want) || !tt.prefix && res.Content != tt.want {
				t.Errorf("got %.200q, want %.200q", res.Content, tt.want)
			}
			f.wantDecision(t, "read_file", toolreg.DecisionAllowed, toolreg.ReasonGranted)
		})
	}
	t.Run("cap size", func(t *testing.T) {
		res, err := f.call(t, "read_file", map[string]any{"path": "big.txt"})
		mustDo(t, err)
		want := fmt.Sprintf("\n[truncated: bytes 0-%d of %d shown; read on with offset %d]", maxReadBytes, len(big), maxReadBytes)
		if len(res.Content) != maxReadBytes+len(want) || !strings.HasSuffix(res.Content, want) {
			t.Errorf("got %d bytes ending %q, want %d file bytes and %q", len(res.Content), res.Content[len(res.Content)-80:], maxReadBytes, want)
		}
	})
}

func TestReadFile_FIFOIsRefusedWithoutBlocking(t *testing.T) {
	f := newFixture(t, allTools)
	mustDo(t, syscall.Mkfifo(filepath.Join(f.ws, "pipe"), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := f.call(t, "read_file", map[string]any{"path": "pipe"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "read_file: not a regular file" {
			t.Errorf("got %v, want a refusal of the FIFO", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read_file blocked on a FIFO")
	}
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t, allTools)
	t.Run("creates parents with mode 0644", func(t *testing.T) {
		old := syscall.Umask(0o077)
		defer syscall.Umask(old)
		res, err := f.call(t, "write_file", map[string]any{"path": "a/b/c.txt", "content": "hi\n"})
		mustDo(t, err)
		if res.Content != "wrote 3 bytes to a/b/c.txt" {
			t.Errorf("got %q", res.Content)
		}
		b, err := os.ReadFile(filepath.Join(f.ws, "a/b/c.txt"))
		mustDo(t, err)
		fi, err := os.Stat(filepath.Join(f.ws, "a/b/c.txt"))
		mustDo(t, err)
		if string(b) != "hi\n" || fi.Mode().Perm() != 0o644 {
			t.Errorf("got %q mode %v, want %q 0644", b, fi.Mode().Perm(), "hi\n")
		}
		f.wantDecision(t, "write_file", toolreg.DecisionAllowed, toolreg.ReasonGranted)
	})
	t.Run("replaces and keeps the mode", func(t *testing.T) {
		p := filepath.Join(f.ws, "script.sh")
		mustDo(t, os.WriteFile(p, []byte("old content that is longer"), 0o755))
		mustDo(t, os.Chmod(p, 0o755))
		_, err := f.call(t, "write_file", map[string]any{"path": "script.sh", "content": "new"})
		mustDo(t, err)
		b, _ := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if string(b) != "new" || fi.Mode().Perm() != 0o755 {
			t.Errorf("got %q mode %v, want %q 0755", b, fi.Mode().Perm(), "new")
		}
	})
	t.Run("writes through a link inside the workspace", func(t *testing.T) {
		mustDo(t, os.Symlink("target.txt", filepath.Join(f.ws, "link.txt")))
		_, err := f.call(t, "write_file", map[string]any{"path": "link.txt", "content": "via link"})
		mustDo(t, err)
		if b, _ := os.ReadFile(filepath.Join(f.ws, "target.txt")); string(b) != "via link" {
			t.Errorf("target holds %q", b)
		}
	})
	t.Run("dangling link out is refused", func(t *testing.T) {
		mustDo(t, os.Symlink(filepath.Join(f.outside, "new.txt"), filepath.Join(f.ws, "dangling")))
		_, err := f.call(t, "write_file", map[string]any{"path": "dangling", "content": "x"})
		var de *toolreg.DeniedError
		if !errors.As(err, &de) || de.Reason != ReasonOutsideWorkspace {
			t.Fatalf("got %v, want a refusal", err)
		}
		if _, err := os.Lstat(filepath.Join(f.outside, "new.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a file was created outside the workspace")
		}
	})
	errCases := []struct {
		name, path, content, wantErr string
	}{
		{"workspace root", ".", "x", "write_file: the path names the workspace root, not a file"},
		{"a directory", "src", "x", "write_file: is a directory"},
		{"too large", "big.bin", strings.Repeat("x", maxWriteBytes+1), "write_file: content is larger than 10485760 bytes"},
		{"parent is a file", "README.md/x", "x", "write_file: a component of the path is not a directory"},
	}
	for _, tt := range errCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.call(t, "write_file", map[string]any{"path": tt.path, "content": tt.content})
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			f.wantDecision(t, "write_file", toolreg.DecisionError, "tool error: "+tt.wantErr)
		})
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Error("an oversized write left a file")
	}
}

func TestListFiles(t *testing.T) {
	f := newFixture(t, allTools)
	mustDo(t, os.MkdirAll(filepath.Join(f.ws, ".git", "objects"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(f.ws, "emptydir"), 0o755))
	tests := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "root", args: map[string]any{},
			want: ".git/\nREADME.md\nabs@\nemptydir/\netc@\nout@\noutfile@\nsrc/"},
		{name: "subdirectory", args: map[string]any{"path": "src"}, want: "src/inner-link@\nsrc/main.go"},
		{name: "recursive skips .git", args: map[string]any{"path": ".", "recursive": true},
			want: ".git/\nREADME.md\nabs@\nemptydir/\netc@\nout@\noutfile@\nsrc/\nsrc/inner-link@\nsrc/main.go"},
		{name: "inside .git when asked", args: map[string]any{"path": ".git"}, want: ".git/HEAD\n.git/objects/"},
		{name: "empty directory", args: map[string]any{"path": "emptydir"}, want: "[empty directory]"},
		{name: "a file", args: map[string]any{"path": "README.md"}, wantErr: "list_files: not a directory; use read_file"},
		{name: "missing", args: map[string]any{"path": "nope"}, wantErr: "list_files: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.call(t, "list_files", tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %q, %v; want error %q", res.Content, err, tt.wantErr)
				}
				return
			}
			mustDo(t, err)
			if res.Content != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", res.Content, tt.want)
			}
		})
	}
	t.Run("names cannot forge lines", func(t *testing.T) {
		dir := filepath.Join(f.ws, "odd")
		mustDo(t, os.Mkdir(dir, 0o755))
		for _, n := range []string{"evil\nREADME.md", "plain@", "\"q", "ok"} {
			mustDo(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
		}
		res, err := f.call(t, "list_files", map[string]any{"path": "odd"})
		mustDo(t, err)
		want := `odd/"q` + "\n" + `"odd/evil\nREADME.md"` + "\nodd/ok\n" + `"odd/plain@"`
		if res.Content != want {
			t.Errorf("got:\n%s\nwant:\n%s", res.Content, want)
		}
	})
	t.Run("capped", func(t *testing.T) {
		dir := filepath.Join(f.ws, "many")
		mustDo(t, os.Mkdir(dir, 0o755))
		for i := range maxListEntries + 5 {
			mustDo(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644))
		}
		res, err := f.call(t, "list_files", map[string]any{"path": "many", "recursive": true})
		mustDo(t, err)
		lines := strings.Split(res.Content, "\n")
		if len(lines) != maxListEntries+1 || lines[len(lines)-1] != "[listing capped at 2000 entries]" {
			t.Errorf("got %d lines ending %q, want %d entries and the cap note", len(lines), lines[len(lines)-1], maxListEntries)
		}
	})
}

func TestSearchFiles(t *testing.T) {
	f := newFixture(t, allTools)
	mustDo(t, os.MkdirAll(filepath.Join(f.ws, ".git"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("hello from git\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "bin.dat"), []byte("hello\x00binary"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "crlf.txt"), []byte("one\r\nhello two\r\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "long.txt"), []byte("hello "+strings.Repeat("y", 1000)+"\n"), 0o644))
	huge := bytes.Repeat([]byte("hello\n"), maxSearchFileBytes/6+1)
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "huge.txt"), huge, 0o644))

	tests := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "whole workspace", args: map[string]any{"pattern": `hello\b`},
			want: "README.md:2: hello world\ncrlf.txt:2: hello two\nlong.txt:1: hello " + strings.Repeat("y", maxMatchLineBytes-6) + "…\n" +
				`src/main.go:3: func main() { println("hello") }` + "\n[skipped 1 files over 4194304 bytes]"},
		{name: "one directory", args: map[string]any{"pattern": "func", "path": "src"}, want: `src/main.go:3: func main() { println("hello") }`},
		{name: "one file", args: map[string]any{"pattern": "^#", "path": "README.md"}, want: "README.md:1: # demo"},
		{name: "a link inside, named", args: map[string]any{"pattern": "demo", "path": "src/inner-link"}, want: "src/inner-link:1: # demo"},
		{name: "max results", args: map[string]any{"pattern": "hello", "max_results": 1},
			want: "README.md:2: hello world\n[results capped at 1 matches]"},
		{name: "no match", args: map[string]any{"pattern": "zzz"}, want: "[no matches]\n[skipped 1 files over 4194304 bytes]"},
		{name: "bad pattern", args: map[string]any{"pattern": "(" + planted}, wantErr: "search_files: invalid pattern: missing closing )"},
		{name: "missing path", args: map[string]any{"pattern": "x", "path": "nope"}, wantErr: "search_files: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.call(t, "search_files", tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %q, %v; want error %q", res.Content, err, tt.wantErr)
				}
				f.wantDecision(t, "search_files", toolreg.DecisionError, "tool error: "+tt.wantErr)
				return
			}
			mustDo(t, err)
			if res.Content != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", res.Content, tt.want)
			}
		})
	}
}
