package codexadapter

import (
	"bufio"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

// codexDefaultShell returns the shell Codex 0.169.0 runs a command in when the model names
// none, found as Codex finds it: the login shell of the process's user in /etc/passwd when it
// is a shell Codex knows (bash, zsh, sh) and can run, else bash on PATH, else /bin/sh (checked
// against the real CLI: a user whose passwd shell is /bin/sh gets "/bin/sh -lc"; a uid with no
// entry, or the sandbox's, whose entry says /usr/sbin/nologin, gets "/usr/bin/bash -lc"). The
// relay's check judges a call as running in it; the check of what codex started judges what
// codex reports, by the same function, so a wrong guess can only make the two differ for a
// grant that names a shell, and then the second records what ran as ran-outside-grant.
func codexDefaultShell(env []string) string {
	if sh := passwdShell(os.Getuid()); sh != "" {
		switch path.Base(sh) {
		case "bash", "zsh", "sh":
			if p, err := execrt.LookPath(sh, ""); err == nil && path.IsAbs(p) {
				return p
			}
		}
	}
	if p, err := execrt.LookPath("bash", execrt.EnvValue(env, "PATH")); err == nil {
		return p
	}
	return "/bin/sh"
}

// passwdShell returns the shell field of uid's entry in /etc/passwd, or "".
func passwdShell(uid int) string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := strconv.Itoa(uid)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[2] == want {
			return fields[6]
		}
	}
	return ""
}

// execArgv returns the argv Codex runs for an exec_command call: the shell, -lc (or -c when
// the call sets login false) and the script. defaultShell is the shell when the call names
// none. A call naming a shell other than a system shell (codexrt.SystemShell) yields nil,
// refused: Codex runs another name as whatever it takes it for (an unknown one as /bin/sh, a
// path it cannot run as the shell of that name it finds), so the gate cannot know what runs.
func execArgv(a *execArgs, defaultShell string) []string {
	shell := defaultShell
	if a.Shell != nil {
		if !codexrt.SystemShell(*a.Shell) {
			return nil
		}
		shell = *a.Shell
	}
	flag := "-lc"
	if a.Login != nil && !*a.Login {
		flag = "-c"
	}
	return []string{shell, flag, *a.Cmd}
}
