package gitbranch_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// run100 is a 100-task run: each task edits its own line of one shared file and adds a file
// of its own, all against the same base, as a run's tasks do.
func run100(b *testing.B) (string, string, []gitbranch.Change) {
	requireGit(b)
	var src strings.Builder
	for i := range 100 {
		fmt.Fprintf(&src, "line %d\n\n\n", i)
	}
	dir, base := repo(b, map[string]string{"shared.txt": src.String()})
	changes := make([]gitbranch.Change, 100)
	for i := range changes {
		changes[i] = gitbranch.Change{
			Label: fmt.Sprintf("task t%03d", i), Author: sig("fixer"), Message: fmt.Sprintf("task t%03d\n", i),
			Patch: patchOf(b, dir, base, func(d string) {
				write(d, "shared.txt", strings.Replace(src.String(), fmt.Sprintf("line %d\n", i), fmt.Sprintf("LINE %d\n", i), 1))
				write(d, fmt.Sprintf("t%03d.txt", i), "task\n")
			}),
		}
	}
	return dir, base, changes
}

// BenchmarkCreate100: a branch of 100 commits, each a three-way apply on the branch so far.
// Target: at most 5 s per op.
func BenchmarkCreate100(b *testing.B) {
	dir, base, changes := run100(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := gitbranch.Create(b.Context(), fmt.Sprintf("agora/bench-%d", i), gitbranch.Options{Repo: dir, Base: base, Changes: changes}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineGitApply100 is the floor to compare with: the same 100 patches applied by
// 100 `git apply --cached --3way` runs on one index, with no commits and no ref.
func BenchmarkBaselineGitApply100(b *testing.B) {
	dir, base, changes := run100(b)
	b.ResetTimer()
	for b.Loop() {
		idx := b.TempDir() + "/index"
		env := []string{"GIT_INDEX_FILE=" + idx, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
		cmd := exec.Command("git", "read-tree", base)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		for _, c := range changes {
			cmd := exec.Command("git", "apply", "--cached", "--3way", "-")
			cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader(string(c.Patch))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
}

// BenchmarkBaselineCombinedApply100 is the other floor: the run's 100 changes as the one
// combined patch, applied by a single `git apply --cached` and written as one tree.
func BenchmarkBaselineCombinedApply100(b *testing.B) {
	dir, base, changes := run100(b)
	combined, err := gitbranch.Combined(b.Context(), gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		idx := b.TempDir() + "/index"
		env := []string{"GIT_INDEX_FILE=" + idx, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
		for _, args := range [][]string{{"read-tree", base}, {"apply", "--cached", "-"}, {"write-tree"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader(string(combined))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
}

// BenchmarkCombined100: the --combined patch of the same run (100 three-way applies, no
// commit, one diff-tree).
func BenchmarkCombined100(b *testing.B) {
	dir, base, changes := run100(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := gitbranch.Combined(b.Context(), gitbranch.Options{Repo: dir, Base: base, Changes: changes}); err != nil {
			b.Fatal(err)
		}
	}
}
