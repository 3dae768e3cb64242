package claudeadapter

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRedTeam4_HookRefusesWritesIntoGit: the pre-tool hook's judgment of
// Claude Code's file tools: a path into a .git directory, spelt so, relative to claude's cwd,
// through a symlink or a dangling one, is refused, and so is one that resolves outside the
// workspace (claude's shell snapshot under /tmp, through a committed link to /tmp); an input
// it cannot read exactly is too; an ordinary path passes. Claude Code refuses the plain spellings by its own rules; agora
// does not rest on them.
func TestRedTeam4_HookRefusesWritesIntoGit(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
	os.Symlink(".git", filepath.Join(dir, "meta"))
	os.Symlink(".git/hooks/pre-commit", filepath.Join(dir, "hook"))
	os.Symlink("/tmp", filepath.Join(dir, "tmp"))
	for _, tc := range []struct {
		tool, input string
		refused     bool
	}{
		{"Write", `{"file_path":"` + dir + `/.git/config","content":"x"}`, true},
		{"Edit", `{"file_path":".git/config","old_string":"a","new_string":"b"}`, true},
		{"MultiEdit", `{"file_path":"` + dir + `/meta/config","edits":[]}`, true},
		{"Write", `{"file_path":"` + dir + `/hook","content":"x"}`, true},
		{"NotebookEdit", `{"notebook_path":"` + dir + `/sub/.git/x.ipynb","new_source":""}`, true},
		{"Write", `{"file_path":"` + dir + `/README.md","content":"x","File_path":"` + dir + `/.git/config"}`, true},
		{"Write", `{"content":"x"}`, true},
		{"Write", `{"file_path":"/tmp/.claude/shell-snapshots/x.sh","content":"x"}`, true},
		{"Write", `{"file_path":"` + dir + `/tmp/.bash_profile","content":"x"}`, true},
		{"Edit", `{"file_path":"../outside","old_string":"a","new_string":"b"}`, true},
		{"Write", `{"file_path":"` + dir + `/README.md","content":"x"}`, false},
		{"Edit", `{"file_path":"docs/.gitignore","old_string":"a","new_string":"b"}`, false},
	} {
		path, ok, err := editedPath(tc.tool, []byte(tc.input))
		refused := ok && (err != nil || editRefusal(path, dir, dir) != "")
		if refused != tc.refused {
			t.Errorf("%s %s: refused = %v (path %q, %v), want %v", tc.tool, tc.input, refused, path, err, tc.refused)
		}
	}
}
