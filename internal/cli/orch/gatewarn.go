package orch

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/gitexec"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// maxBaseDirs caps the directories of a base tree validate reads for its glob warnings.
const maxBaseDirs = 1_000_000

// baseTree is the tree orch validate checks the gates' globs against: --repo PATH[@REV], else
// the git repository the current directory is in, at HEAD, when there is one. It returns the
// tree's directories and what it read ("~/src/app@HEAD"), or none of them when there is no
// repository to read; an explicit --repo that cannot be read is an error.
func baseTree(ctx context.Context, repo string) ([]string, string, error) {
	dir, rev := cmdutil.SplitRepo(repo)
	if repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", nil
		}
		if dir = enclosingRepo(wd); dir == "" {
			return nil, "", nil
		}
	}
	rev = cmp.Or(rev, "HEAD")
	if strings.HasPrefix(rev, "-") {
		return nil, "", fmt.Errorf("--repo %q: a revision cannot start with '-'", repo)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	var out, errb bytes.Buffer
	cmd := gitexec.Command(ctx, abs, "ls-tree", "-r", "-t", "-z", "--full-tree", rev+"^{tree}")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if repo == "" {
			return nil, "", nil // the current directory's repository has no HEAD to read: nothing to check
		}
		return nil, "", fmt.Errorf("--repo %s: read the tree of %s: %s", abs, rev, strings.TrimSpace(errb.String()))
	}
	var dirs []string
	for _, rec := range bytes.Split(out.Bytes(), []byte{0}) {
		// "MODE TYPE OBJECT\tPATH"
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok || !bytes.Contains(meta, []byte(" tree ")) {
			continue
		}
		if len(dirs) == maxBaseDirs {
			break
		}
		dirs = append(dirs, string(p))
	}
	return dirs, abs + "@" + rev, nil
}

// enclosingRepo is the nearest directory at or above dir holding .git, or "".
func enclosingRepo(dir string) string {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// gateWarnings are p's verify gate warnings against the base tree opts name (see baseTree),
// and the tree read ("" for none).
func gateWarnings(ctx context.Context, opts *planOptions, p *plan.Plan) ([]plan.Warning, string, error) {
	dirs, base, err := baseTree(ctx, opts.repo)
	if err != nil {
		return nil, "", err
	}
	w := p.GateWarnings(dirs)
	if w == nil {
		w = []plan.Warning{}
	}
	return w, base, nil
}
