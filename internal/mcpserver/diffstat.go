package mcpserver

import "bytes"

// Diffstat counts what a patch changes: files, and lines added and removed in text hunks.
// It reads the stored patch text on the host; git is never run on it.
type Diffstat struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

// diffstat parses a `git diff` patch: each "diff --git " line starts a file; inside a hunk
// (after an "@@" line) a '+' or '-' line counts, and the ---/+++ headers before the first hunk
// of a file do not. Binary sections and anything else are skipped. Any input is safe: it
// only counts.
func diffstat(patch []byte) Diffstat {
	var d Diffstat
	inHunk := false
	for len(patch) > 0 {
		line := patch
		if i := bytes.IndexByte(patch, '\n'); i >= 0 {
			line, patch = patch[:i], patch[i+1:]
		} else {
			patch = nil
		}
		switch {
		case bytes.HasPrefix(line, []byte("diff --git ")):
			d.Files++
			inHunk = false
		case bytes.HasPrefix(line, []byte("@@")):
			inHunk = d.Files > 0
		case !inHunk:
		case len(line) > 0 && line[0] == '+':
			d.Insertions++
		case len(line) > 0 && line[0] == '-':
			d.Deletions++
		case len(line) > 0 && line[0] != ' ' && line[0] != '\\':
			inHunk = false // "GIT binary patch", a mode line: the hunk is over
		}
	}
	return d
}
