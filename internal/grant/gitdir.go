package grant

import (
	"path/filepath"
	"strings"
)

// InGitDir reports whether rel, a path relative to a work tree (either separator), names a
// .git directory or file or anything under one: a file tool must never write there. git
// reads a repository's own configuration from .git/config, and that configuration names
// programs git runs (core.fsmonitor on every `git status`, core.editor, diff.external,
// filter drivers, hooks under .git/hooks): a grant of write_file and `git status` would
// otherwise grant any command. Any component equal to ".git" in any
// case counts, as does one git would take for it on a case-insensitive file system.
func InGitDir(rel string) bool {
	for _, c := range strings.FieldsFunc(filepath.ToSlash(rel), func(r rune) bool { return r == '/' || r == '\\' }) {
		if strings.EqualFold(strings.TrimRight(c, ". "), ".git") {
			return true
		}
	}
	return false
}
