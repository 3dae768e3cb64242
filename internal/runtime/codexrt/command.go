package codexrt

import (
	"path"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/shellwords"
)

// SystemShell reports whether program is a shell codex wraps commands in ("/usr/bin/bash -lc
// '<script>'") at a path the sandbox's read-only system tree holds. Only such a shell's script
// is read as the command it runs, and only such a program may be named by its base name: a
// "bash" in the workspace (which the model can write, and name through exec_command's
// "shell" argument) is not bash. zsh is not one: it reads words unlike POSIX sh (=cmd, globs).
func SystemShell(program string) bool {
	switch program {
	case "/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh":
		return true
	}
	return false
}

// ArgvForms returns the forms of a command codex runs (argv, as it execs it) in the order a
// grant is matched against them:
//
//   - when argv is a system shell running one script ("/usr/bin/bash -lc 'git status'") and
//     the script is one simple command of literal words ([shellwords.Split]), the script's
//     words: ["git", "status"];
//   - argv itself, and, for a system shell, the same with the shell's base name (["bash",
//     "-lc", "git status"]): a grant allows any script only by naming the shell ("bash -lc *").
func ArgvForms(argv []string) [][]string {
	if len(argv) == 0 {
		return nil
	}
	var out [][]string
	shell := SystemShell(argv[0])
	if shell && len(argv) == 3 && (argv[1] == "-lc" || argv[1] == "-c") {
		if inner, err := shellwords.Split(argv[2]); err == nil {
			out = append(out, inner)
		}
	}
	out = append(out, argv)
	if shell {
		out = append(out, append([]string{path.Base(argv[0])}, argv[1:]...))
	}
	return out
}

// ArgvAllowed is the one judgment of a codex command, whether the model asks for it (the
// relay's check) or codex starts it (the check of codex's events): whether any form of argv
// (see [ArgvForms]) matches one of the grant's command patterns.
func ArgvAllowed(patterns []string, argv []string) bool {
	for _, form := range ArgvForms(argv) {
		if grant.CommandAllowed(patterns, form) {
			return true
		}
	}
	return false
}
