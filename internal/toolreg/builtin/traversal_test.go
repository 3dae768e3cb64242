package builtin

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/toolreg"
)

// TestFileTools_RefuseEscapes tries every way out of the workspace with every file tool.
func TestFileTools_RefuseEscapes(t *testing.T) {
	paths := []struct {
		name, path, hint string
	}{
		{"dotdot", "../../etc/passwd", `".."`},
		{"dotdot to sibling", "../outside/secret.txt", `".."`},
		{"dotdot after a dir", "src/../../outside/secret.txt", `".."`},
		{"absolute", "/etc/passwd", "absolute"},
		{"absolute into workspace", "/" + "tmp", "absolute"},
		{"symlink dir to /etc", "etc/passwd", "symbolic link"},
		{"symlink to /etc itself", "etc", "symbolic link"},
		{"symlink dir to ../outside", "out/secret.txt", "symbolic link"},
		{"symlink to ../outside itself", "out", "symbolic link"},
		{"symlink file to outside", "outfile", "symbolic link"},
		{"absolute symlink", "abs/secret.txt", "symbolic link"},
		{"NUL byte", "README.md\x00", "NUL"},
	}
	type call struct {
		tool string
		args func(p string) map[string]any
	}
	calls := []call{
		{"read_file", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"write_file", func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned " + planted} }},
		{"list_files", func(p string) map[string]any { return map[string]any{"path": p, "recursive": true} }},
		{"search_files", func(p string) map[string]any { return map[string]any{"pattern": "OUTSIDE|root", "path": p} }},
	}
	f := newFixture(t, allTools)
	before := treeHash(t, filepath.Dir(f.ws))
	for _, c := range calls {
		for _, p := range paths {
			t.Run(c.tool+"/"+p.name, func(t *testing.T) {
				args := c.args(p.path)
				res, err := f.call(t, c.tool, args)
				var de *toolreg.DeniedError
				if !errors.As(err, &de) {
					t.Fatalf("got result %q error %v, want a refusal", res.Content, err)
				}
				if de.Reason != ReasonOutsideWorkspace || !strings.Contains(err.Error(), p.hint) {
					t.Errorf("error %q, want reason %q and a hint about %s", err, ReasonOutsideWorkspace, p.hint)
				}
				if strings.Contains(err.Error(), p.path) && p.path != "etc" && p.path != "out" {
					t.Errorf("error %q repeats the path argument", err)
				}
				f.wantDecision(t, c.tool, toolreg.DecisionDenied, ReasonOutsideWorkspace)
				if got, want := f.last(t).ArgsHash, argsHash(t, args); got != want {
					t.Errorf("args hash %s, want %s", got, want)
				}
			})
		}
	}
	if treeHash(t, filepath.Dir(f.ws)) != before {
		t.Error("the workspace or its neighbour changed")
	}
}

// TestFileTools_WholeWorkspaceNeverShowsOutside lists and searches the whole workspace, which
// holds links that lead out: they are shown as links, never followed.
func TestFileTools_WholeWorkspaceNeverShowsOutside(t *testing.T) {
	f := newFixture(t, allTools)
	res, err := f.call(t, "list_files", map[string]any{"recursive": true})
	if err != nil {
		t.Fatal(err)
	}
	want := "README.md\nabs@\netc@\nout@\noutfile@\nsrc/\nsrc/inner-link@\nsrc/main.go"
	if res.Content != want {
		t.Errorf("list:\n%s\nwant:\n%s", res.Content, want)
	}
	res, err = f.call(t, "search_files", map[string]any{"pattern": "OUTSIDE|root:"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "[no matches]" {
		t.Errorf("search found %q, want no matches", res.Content)
	}
}

// TestEscapes_RecognisesRootError pins the text os.Root uses for a path leading out, which
// escapes depends on for a clear refusal message.
func TestEscapes_RecognisesRootError(t *testing.T) {
	f := newFixture(t, allTools)
	ws := workspace{dir: f.ws}
	root, err := ws.open("test")
	mustDo(t, err)
	defer root.Close()
	_, err = root.Open("etc/passwd")
	if !escapes(err) {
		t.Fatalf("os.Root error %v is not recognised as an escape", err)
	}
	_, err = root.Open("missing")
	if escapes(err) {
		t.Fatalf("not-exist error %v taken for an escape", err)
	}
}
