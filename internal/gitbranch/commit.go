package gitbranch

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A branch's commits are written by git in one process at the end, rather than one
// commit-tree per task: agora lays out each commit object exactly as commit-tree would and
// computes its id (the next commit's parent) itself, then `git hash-object -t commit -w
// --stdin-paths` checks every object's format, stores them all and prints their ids, which
// must be the ones computed. A commit-tree process per task was a third of a branch's cost.

// commitObject is the body of the commit of tree on parent for c, dated unix (UTC).
func commitObject(tree, parent string, c Change, unix int64) ([]byte, error) {
	for _, s := range []string{c.Author.Name, c.Author.Email} {
		if s == "" || strings.ContainsAny(s, "<>\n\x00") {
			return nil, fmt.Errorf("%s: author %q <%s> cannot be written in a commit (empty, or holds <, >, a newline or NUL)", c.Label, c.Author.Name, c.Author.Email)
		}
	}
	if strings.IndexByte(c.Message, 0) >= 0 {
		return nil, fmt.Errorf("%s: the commit message holds a NUL", c.Label)
	}
	date := strconv.FormatInt(unix, 10) + " +0000"
	var b strings.Builder
	b.WriteString("tree " + tree + "\n")
	b.WriteString("parent " + parent + "\n")
	b.WriteString("author " + c.Author.Name + " <" + c.Author.Email + "> " + date + "\n")
	b.WriteString("committer " + committer.Name + " <" + committer.Email + "> " + date + "\n")
	b.WriteString("\n" + c.Message)
	return []byte(b.String()), nil
}

// objectID is git's id of an object of type typ with body, in format (sha1 or sha256).
func objectID(format, typ string, body []byte) string {
	var h hash.Hash = sha1.New()
	if format == "sha256" {
		h = sha256.New()
	}
	fmt.Fprintf(h, "%s %d\x00", typ, len(body))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// writeCommits has git store the commit objects and checks it computed the same ids.
func (b *builder) writeCommits(ctx context.Context, bodies [][]byte, ids []string) error {
	if len(bodies) == 0 {
		return nil
	}
	var paths strings.Builder
	for i, body := range bodies {
		p := filepath.Join(b.tmp, fmt.Sprintf("commit-%d", i))
		if err := os.WriteFile(p, body, 0o600); err != nil {
			return err
		}
		paths.WriteString(p + "\n")
	}
	out, err := b.git(ctx, []byte(paths.String()), "hash-object", "-t", "commit", "-w", "--stdin-paths")
	if err != nil {
		return fmt.Errorf("write the commits: %w", err)
	}
	got := strings.Fields(string(out))
	if len(got) != len(ids) {
		return fmt.Errorf("write the commits: git printed %d ids for %d commits", len(got), len(ids))
	}
	for i := range ids {
		if got[i] != ids[i] {
			return fmt.Errorf("write the commits: git stored commit %d as %s, agora computed %s", i+1, got[i], ids[i])
		}
	}
	return nil
}
