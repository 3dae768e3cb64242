package grant

import "testing"

// TestRedTeam4_InGitDir: every spelling of a path into a .git directory is one, and names
// that only look alike are not.
func TestRedTeam4_InGitDir(t *testing.T) {
	for _, p := range []string{".git", ".git/config", "./.git/config", "sub/.git/hooks/pre-commit", ".GIT/config",
		`sub\.git\config`, ".git./config", ".git /config", "a/b/.git"} {
		if !InGitDir(p) {
			t.Errorf("InGitDir(%q) = false, want true", p)
		}
	}
	for _, p := range []string{"", ".", ".gitignore", ".github/workflows/x.yml", "git/config", "a.git/config", ".gitmodules", "x/.git-blame-ignore"} {
		if InGitDir(p) {
			t.Errorf("InGitDir(%q) = true, want false", p)
		}
	}
}
