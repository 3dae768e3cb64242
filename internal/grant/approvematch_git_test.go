package grant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOutside_RealGitNeverPushes checks the proof against git itself: argvs built at random
// from git's global options, wrappers, aliases and subcommands run in a real repository with
// a bare remote on the same disk, and every one the docs' rule ("git push *") lets through
// unheld must leave the remote's refs as they were. The repository's own config defines an
// alias (pp = push), as a model could have written it.
func TestOutside_RealGitNeverPushes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git is not installed")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(dir, "gitconfig"),
		"GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=true", "GIT_PAGER=cat", "PAGER=cat",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
	run := func(wd string, argv ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = wd, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(wd string, argv ...string) string {
		out, err := run(wd, argv...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", argv, err, out)
		}
		return out
	}
	remote, work := filepath.Join(dir, "r.git"), filepath.Join(dir, "w")
	must(dir, "git", "init", "-q", "--bare", remote)
	must(dir, "git", "init", "-q", work)
	os.WriteFile(filepath.Join(work, "a.txt"), []byte("a\n"), 0o644)
	must(work, "git", "add", "a.txt")
	must(work, "git", "commit", "-qm", "one")
	must(work, "git", "remote", "add", "origin", remote)
	must(work, "git", "push", "-q", "origin", "HEAD:refs/heads/main")
	must(work, "git", "branch", "--set-upstream-to=origin/main")
	must(work, "git", "config", "alias.pp", "push")
	must(work, "git", "config", "push.default", "upstream")

	prefixes := [][]string{{}, {}, {}, {"env"}, {"nice"}, {"timeout", "10"}, {"env", "LANG=C"},
		{"setsid", "-w"}, {"stdbuf", "-o0"}, {"env", "-i", "PATH=" + os.Getenv("PATH")}}
	globals := [][]string{{}, {}, {"-c", "x.y=z"}, {"-c", "user.name=n"}, {"-C", "."},
		{"--git-dir=.git"}, {"--no-pager"}, {"-c", "alias.p=push"}, {"-c", "alias.q=status"},
		{"--work-tree=."}, {"-c", "Alias.P=push"}, {"-c", "color.ui=never"}, {"--literal-pathspecs"}}
	subs := []string{"push", "push", "send-pack", "status", "log", "fetch", "p", "q", "pp", "show",
		"config", "ls-remote", "rev-parse", "stage", "help", "Push"}
	args := []string{"origin", "HEAD:refs/heads/%s", "--force", "-q", "HEAD", "alias.p", "user.name",
		remote, "--all", "--mirror", "-u", "push", "main"}
	rng := rand.New(rand.NewPCG(26, 3))
	rule := ApproveRule{Command: "git push *"}
	refs := func() string { return must(remote, "git", "for-each-ref", "--format=%(refname) %(objectname)") }
	// The oracle can see a push: the held forms do push here.
	for _, held := range [][]string{{"git", "-c", "x.y=z", "push", "origin", "HEAD:refs/heads/seen1"}, {"git", "pp", "origin", "HEAD:refs/heads/seen2"}} {
		before := refs()
		must(work, held...)
		if refs() == before {
			t.Fatalf("%q did not push: the oracle would see nothing", held)
		}
	}
	ran, unheld := 0, 0
	for i := range 250 {
		argv := append([]string(nil), prefixes[rng.IntN(len(prefixes))]...)
		argv = append(argv, "git")
		argv = append(argv, globals[rng.IntN(len(globals))]...)
		argv = append(argv, subs[rng.IntN(len(subs))])
		for range rng.IntN(4) {
			argv = append(argv, strings.ReplaceAll(args[rng.IntN(len(args))], "%s", fmt.Sprintf("b%d", i)))
		}
		if _, outside := rule.Outside("run_command", argv); !outside {
			continue
		}
		unheld++
		before := refs()
		run(work, argv...) //nolint:errcheck // many argvs are git errors; only the remote matters
		ran++
		if after := refs(); after != before {
			t.Errorf("%q was not held by %q, and it changed the remote's refs:\nbefore %safter %s", argv, rule.Command, before, after)
			// Restore, so the next argv is judged alone.
			must(remote, "sh", "-c", "git for-each-ref --format='delete %(refname)' 'refs/heads/b*' | git update-ref --stdin")
		}
	}
	if unheld < 50 {
		t.Fatalf("only %d of 250 argvs were outside the rule; the test judges too few", unheld)
	}
	t.Logf("%d argvs outside the rule ran against real git; none pushed", ran)
}
