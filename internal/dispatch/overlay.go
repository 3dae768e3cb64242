package dispatch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
)

// OverlayError refuses a dispatch whose capabilities would place a file in the workspace
// over one of the checkout's. It names the capability, the path and where the checkout
// comes from (a workspace's name, or a repository's path for the people who named one).
type OverlayError struct {
	Capability, Path string
	// Blocker is the checkout's entry in the way: Path itself, or a file above it.
	Blocker string
	Where   string
}

func (e *OverlayError) Error() string {
	if e.Blocker == e.Path {
		return fmt.Sprintf("capability %q overlays %s, which %s already has; the capability's files would replace the repository's: "+
			"narrow its overlay: patterns (its other files are mounted at $AGORA_CAPABILITIES/%s)", e.Capability, e.Path, e.Where, e.Capability)
	}
	return fmt.Sprintf("capability %q overlays %s, but %s has a file at %s where that needs a directory; narrow its overlay: patterns",
		e.Capability, e.Path, e.Where, e.Blocker)
}

// checkOverlays refuses, before the record is written, capabilities of doc that overlay
// the same path, or a path the checkout of repo at commit has (a file or directory there,
// or a file where the path needs a directory). where names the checkout in the error.
func (d *Dispatcher) checkOverlays(ctx context.Context, doc catalog.SubagentDoc, repo, commit, where string) error {
	names, files, err := d.Catalog.Overlays(ctx, doc.Capabilities)
	if err != nil {
		return err
	}
	if err := catalog.CheckOverlayClash(names, files); err != nil {
		return &RequestError{Err: err}
	}
	if repo == "" {
		return nil // an empty workspace has nothing to replace
	}
	var asked []string
	owner := map[string]string{}
	for i, fs := range files {
		for _, f := range fs {
			if strings.ContainsAny(f, "\n\r") {
				return reqErr("capability %q overlays %q, a path with a line break; rename it", names[i], f)
			}
			owner[f] = names[i]
			for p := f; p != "."; p = path.Dir(p) {
				asked = append(asked, p)
			}
		}
	}
	if len(asked) == 0 {
		return nil
	}
	types, err := treeEntries(ctx, repo, commit, asked)
	if err != nil {
		return err
	}
	for i, fs := range files {
		for _, f := range fs {
			if _, ok := types[f]; ok {
				return &RequestError{Err: &OverlayError{Capability: names[i], Path: f, Blocker: f, Where: where}}
			}
			for p := path.Dir(f); p != "."; p = path.Dir(p) {
				if t, ok := types[p]; ok && t != "tree" {
					return &RequestError{Err: &OverlayError{Capability: names[i], Path: f, Blocker: p, Where: where}}
				}
			}
		}
	}
	return nil
}

// treeEntries returns the object type of each of paths that commit's tree has. commit is a
// full commit id and no path holds a line break, so each line git reads is exactly one
// commit:path, and no path is parsed as a revision.
func treeEntries(ctx context.Context, repo, commit string, paths []string) (map[string]string, error) {
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(commit + ":" + p + "\n")
	}
	cmd := gitCmd(ctx, repo, "cat-file", "--batch-check=%(objecttype)")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("read the tree of %s: %s", commit, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("read the tree of %s: %w", commit, err)
	}
	types := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for i := 0; sc.Scan(); i++ {
		if i >= len(paths) {
			return nil, fmt.Errorf("read the tree of %s: git answered more lines than asked", commit)
		}
		switch line := sc.Text(); line {
		case "blob", "tree", "commit":
			types[paths[i]] = line
		default:
			if !strings.HasSuffix(line, " missing") {
				return nil, fmt.Errorf("read the tree of %s: git answered %q for %s", commit, line, paths[i])
			}
		}
	}
	return types, sc.Err()
}
