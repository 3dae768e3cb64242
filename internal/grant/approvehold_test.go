package grant

import (
	"strings"
	"testing"
)

// The docs' capability: commands ["git **"], approve [write_file, {command: "git push *"}].
// Every way to say "push" the grant lets through must be held; calls
// that are provably something else must not.
var docsRules = []ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}

func TestNeedsApproval_HoldsEveryPush(t *testing.T) {
	held := []string{
		// longer argument lists: * is one argument in a grant pattern, not in a rule
		"git push r.git HEAD:refs/heads/x",
		"git push",
		"git push --force-with-lease origin main",
		// global options before the subcommand
		"git -c x.y=z push r.git HEAD:refs/heads/y",
		"git -C . push r.git",
		"git -C sub -C .. push",
		"git --git-dir=.git push r.git",
		"git --git-dir .git --work-tree . push",
		"git --work-tree=. push",
		"git --namespace=n push",
		"git --no-pager push",
		"git -p push",
		"git --bare push",
		"git --exec-path=/tmp/x push",
		"git --exec-path=/tmp/x status",
		"git --unknown-option push",
		// the program by its path, or by its own name
		"/usr/bin/git push r.git",
		"./git push",
		"/usr/lib/git-core/git-push r.git HEAD:x",
		"git-send-pack r.git HEAD:x",
		// synonyms and helpers
		"git send-pack r.git HEAD:refs/heads/x",
		"git http-push https://h/r.git HEAD",
		"git subtree push --prefix=x r main",
		// aliases: on the command line, from any config file, or set first
		"git -c alias.p=push p r.git HEAD:x",
		"git -c ALIAS.P=push p r.git",
		"git -c Alias.x=!git-push x",
		"git --config-env=alias.p=ENVVAR p",
		"git --config-env alias.p=ENVVAR p",
		"git p r.git HEAD:x",
		"git Push r.git",
		"git pus r.git",
		"git config alias.p push",
		"git config --global alias.p push",
		"git config --add alias.p push",
		"git config set alias.p push",
		"git config --file .git/config alias.p push",
		"git config core.fsmonitor git-push-script",
		"git config core.hooksPath hooks",
		"git config core.sshCommand x",
		"git config include.path other.cfg",
		"git config --rename-section foo alias",
		"git config -e",
		"git config --edit",
		// help.autocorrect runs a mistyped command as the one it resembles
		"git psuh r.git HEAD:x",
		"git -c help.autocorrect=1 pus r.git",
		// configuration that runs commands
		"git -c core.sshCommand=x fetch r",
		"git -c core.pager=x log",
		"git -c core.fsmonitor=x status",
		"git -c include.path=x status",
		"git -c includeIf.onbranch:main.path=x status",
		"git -c protocol.ext.allow=always fetch ext::x",
		// subcommands that run a command they name
		"git rebase -x pushit HEAD~1",
		"git rebase --exec pushit HEAD~1",
		"git rebase --exe=pushit HEAD~1",
		"git rebase -ix pushit HEAD~1",
		"git grep -Opushit x",
		"git grep --open-files-in-pager=pushit x",
		"git grep --open x",
		"git fetch --upload-pack=pushit r",
		"git fetch --upload pushit r",
		"git fetch-pack --exec=pushit r",
		"git pull --upload-pack=pushit r",
		"git ls-remote --upload-pack=pushit r",
		"git clone -u pushit r d",
		"git clone -c alias.x=push r d",
		"git clone --config=core.sshCommand=x r d",
		"git archive --remote=r --exec=pushit HEAD",
		"git fetch ext::pushit",
		"git remote add x ext::pushit",
		"git submodule foreach git push",
		"git bisect run pushit",
		"git difftool -x pushit",
		"git mergetool",
		"git filter-branch --tree-filter pushit",
		"git for-each-repo --config=x push",
		"git merge-index pushit -a",
		"git hook run pre-push",
		"git receive-pack r.git",
		"git-receive-pack r.git",
		"git-shell -c pushit",
		"git instaweb",
		// wrappers
		"env git push",
		"env -i git push r",
		"env - git push",
		"env -u HOME git push",
		"env --unset=HOME git push",
		"env --ign git push",
		"env LANG=C git push",
		"env FOO=1 git status",
		"env GIT_CONFIG_PARAMETERS='alias.p'='push' git p",
		"env GIT_SSH_COMMAND=x git fetch",
		"env PATH=. git status",
		"env -S 'git push'",
		"env -Sgit_push",
		"env --split-string=git_push",
		"env -C /tmp git push",
		"command git push",
		"command -p git push",
		"exec git push",
		"exec -a x git push",
		"builtin git push",
		"nice git push",
		"nice -n 5 git push",
		"nice -5 git push",
		"nice --adjustment=5 git push",
		"nohup git push",
		"timeout 10 git push",
		"timeout -s KILL -k 1 10 git push",
		"timeout --signal=KILL 10 git push",
		"stdbuf -o0 git push",
		"time git push",
		"time -p git push",
		"setsid -w git push",
		"busybox env git push",
		"nice timeout 5 env git push",
		"watch -x git push",
		"watch git push",
		"watch -n 1 git push",
		// xargs: the words come from input agora cannot see
		"xargs git",
		"xargs -0 git",
		"xargs git push",
		"xargs -I{} git {} r.git",
		"xargs -i git {} r.git",
		"xargs sh",
		"xargs env",
		"xargs make",
		// find -exec
		"find . -exec git push r.git ;",
		"find . -execdir git push ;",
		"find . -ok git push ;",
		"find . -name x -exec git {} r.git ;",
		"find . -exec {} push ;",
		"find . -exec git push",
		"find . -exec env git push +",
		// shells and interpreters with inline code
		"sh -c 'git push'",
		"bash -lc 'git push r.git'",
		"bash -c -- 'git push'",
		"bash -c - 'git push'",
		"git -- push",
		"sh -c 'g\"\"it push'",
		"sh -c 'git $0' push",
		"sh -c 'exec \"$@\"' sh git push",
		"sh +x -c 'git push'",
		"bash -o pipefail -c 'git push'",
		"dash -c 'git push'",
		"zsh -c 'nice git push'",
		"zsh -c 'nice =git status'",
		"zsh -c x",
		"sh -c 'git push; true'",
		"sh -c 'true && git push'",
		"sh -c 'git push > /dev/null'",
		"sh -c 'git push &'",
		"sh -c 'FOO=1 git push'",
		"sh -c 'exec git push'",
		"sh -c 'command git push'",
		"sh -c 'eval git push'",
		"sh -c 'git\\ push'",
		"sh -c 'gi\\t push'",
		"bash --unknown -c x",
		"eval git push",
		"python3 -c 'import os; os.system(\"git push\")'",
		"python3 -Ic x",
		"python3 -W error -c x",
		"python -c x",
		"python3.12 -c x",
		"pypy3 -c x",
		"perl -e 'system(q(git push))'",
		"perl -ne x",
		"perl -M'5;system(1)' x.pl",
		"ruby -e x",
		"node -e x",
		"node --eval=x",
		"node --ev x",
		"node -p x",
		"nodejs -e x",
		"node --inspect-brk x.js",
		"awk 'BEGIN{system(\"git push\")}'",
		"gawk -f x.awk",
		"sed 'e git push' f",
		"sed -n 's/x/y/e' f",
		"sed -e 1d -e 'e x' f",
		"sed f -e 'e x'",
		"php -r x",
		"lua5.4 -e x",
		"tclsh8.6 x",
		"deno eval x",
		"vim -c '!git push'",
		// runners agora does not read
		"sudo git push",
		"sudo -u x git status",
		"doas git push",
		"strace -f git push",
		"taskset 1 git push",
		"flock /tmp/l git push",
		"ssh host git push",
		"fakeroot sh -c x",
		"parallel git ::: push",
		// programs agora does not know, whose arguments name git
		"make GIT=git",
		"./deploy.sh git",
		"unknown-tool --cmd='git push'",
		"unknown-tool --cmd=g\"\"it",
		"unknown-tool /usr/bin/git",
		"sh deploy.sh git",
		"python3 x.py git push",
		"python3 -m git",
		// sort --compress-program
		"sort --compress-program=git x",
		"sort --compress=x f",
	}
	for _, line := range held {
		argv := testArgv(t, line)
		if _, ok := NeedsApproval(docsRules, "run_command", argv); !ok {
			t.Errorf("not held: %q", argv)
		}
	}
}

func TestNeedsApproval_OutsideIsNotHeld(t *testing.T) {
	outside := []string{
		"git status",
		"git log --grep push",
		"git log -1",
		"git -C push status",
		"git --git-dir=push status",
		"git show push",
		"git commit -m push",
		"git add push",
		"git stage push",
		"git fetch origin",
		"git pull origin main",
		"git clone r.git d",
		"git config user.name x",
		"git config user.email x@y",
		"git config --get alias.p",
		"git config alias.p",
		"git config --list",
		"git config get alias.p",
		"git -c user.name=x commit -m y",
		"git -c color.ui=never log",
		"git -c Color.UI=never log",
		"git --version",
		"git --exec-path",
		"git --help",
		"git help push",
		"git",
		"git rebase -i HEAD~2",
		"git stash push -m x",
		"git --version push",
		"git cherry-pick -x abc",
		"git grep -n push",
		"env LANG=C git status",
		"env LC_ALL=C GIT_AUTHOR_NAME=a git commit -m x",
		"nice git status",
		"timeout 5 git status",
		"xargs git status",
		"xargs rm",
		"xargs -0 grep push",
		"find . -name '*.go' -exec rm {} ;",
		"find . -name push",
		"ls push",
		"cat git",
		"echo git push",
		"grep -r 'git push' .",
		"rm -rf build",
		"sort -u f",
		"make test",
		"go test ./...",
		"npm test",
		"sh build.sh",
		"bash",
		"bash - x",
		"sh -c git_push",
		"dash -c x",
		"sh -c 'git status'",
		"bash -lc 'git log -1'",
		"sh -c 'env LANG=C git status'",
		"git -v",
		"python3 x.py",
		"python3 -m pytest -k x",
		"perl x.pl",
		"node x.js",
		"sed -n 1p f",
		"sed --sandbox 'e x' f",
		"command -v git",
		"/usr/bin/env LANG=C git status",
	}
	for _, line := range outside {
		argv := testArgv(t, line)
		if r, ok := NeedsApproval(docsRules, "run_command", argv); ok {
			t.Errorf("held by %s: %q", r, argv)
		}
	}
}

// Rules on other programs: the words of a rule may appear anywhere after the program, in
// order; a glob word matches one argument (* crossing /).
func TestNeedsApproval_OtherPrograms(t *testing.T) {
	tests := []struct {
		rule, line string
		want       bool
	}{
		{"npm publish", "npm publish", true},
		{"npm publish", "npm --registry x publish", true},
		{"npm publish", "npm publish --dry-run", true},
		{"npm publish", "npm test", false},
		{"kubectl delete *", "kubectl -n x delete pod y", true},
		{"kubectl delete *", "kubectl get pods", false},
		{"rm *.go", "rm a/b.go", true},
		{"rm *.go", "rm -f x.go", true},
		{"rm *.go", "rm x.txt", false},
		{"rm *", "env rm x", true},
		{"rm *", "sh -c 'rm x'", true},
		{"rm *", "git -c alias.x=!rm x", true},
		{"rm *", "git status", false},
		{"rm *", "find . -delete", false},
		{"python* -m pip *", "python3.12 -m pip install x", true},
		{"python* -m pip *", "python3 -c x", true},
		{"python* -m pip *", "python3 x.py", false},
		{"/usr/bin/git push", "git push", true},
		{"git -C * push *", "git -C x push r", true},
		{"git -C * push *", "git push r", false},
		{"git push origin *", "git push r.git", false},
		{"git push origin *", "git push -f origin main", true},
		{"git **", "git status", true},
		{"git *", "git", true},
		{"make deploy", "make -C x deploy", true},
		{"make deploy", "make test", false},
	}
	for _, tt := range tests {
		rule := ApproveRule{Command: tt.rule}
		if got := rule.Matches("run_command", testArgv(t, tt.line)); got != tt.want {
			t.Errorf("rule %q holds %q: %v, want %v", tt.rule, tt.line, got, tt.want)
		}
	}
}

// testArgv splits a test line into words: blanks separate them, 'single quotes' group.
func testArgv(t testing.TB, line string) []string {
	t.Helper()
	var out []string
	for i, part := range strings.Split(line, "'") {
		if i%2 == 1 {
			out = append(out, part)
			continue
		}
		out = append(out, strings.Fields(part)...)
	}
	return out
}
