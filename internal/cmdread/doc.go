// Package cmdread reads an argv into the commands it runs, as far as the argv alone tells:
// the program itself, and every command a wrapper (env, nice, timeout, xargs, find -exec,
// ...), a shell script that is one simple command (sh -c 'git push') or git's own grammar
// names in its arguments. What it cannot read from the argv (inline code of an
// interpreter, a script of more than one command, a git alias, an option it does not know,
// a runner such as sudo) makes the reading opaque: it never guesses.
//
// Approve rules are its user: a rule holds an operation, and a language as rich as argv has
// many ways to say one ("git -c x=y push", "env git push", "git -c alias.p=push p"), so
// package grant holds a call unless every command read is provably another operation.
// What a command runs from files (a Makefile, package.json scripts, a script, git hooks and
// git configuration stored in files, a test) is beyond any argv; grant.ApproveNotes says so.
//
// It is pure (no I/O; tables built on first use) and runs on both sides of the sandbox: the
// host's accept check and gateway, and the worker's tool paths. It links nothing of agora but
// package shellwords.
package cmdread
