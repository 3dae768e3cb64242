package cmdread

import (
	"strings"
	"sync"
)

// Kind is how agora reads a program's argv.
type Kind int

const (
	// Unread: a program agora has no grammar for. It is held by a rule whose program
	// its arguments mention; what it does otherwise agora cannot see.
	Unread Kind = iota
	// Inert: runs no program named in its arguments (cat, ls, rm, ...), save for the
	// options listed with it.
	Inert
	// Wrapper: runs the command in its arguments (env, nice, timeout, xargs, find -exec).
	Wrapper
	// Shell: a POSIX shell; sh -c SCRIPT is read when SCRIPT is one simple command.
	Shell
	// Interpreter: runs code; opaque with inline code, unread with a script file.
	Interpreter
	// Opaque: runs code or commands in a way agora does not read (awk, sudo, ssh, ...).
	Opaque
	// Git: read by readGit.
	Git
)

// programKinds maps a program name to its kind; interpreters with a version in their name
// (python3.12) are found by interpreterFamily.
var programKinds = sync.OnceValue(func() map[string]Kind {
	m := map[string]Kind{}
	add := func(k Kind, names string) {
		for _, n := range strings.Fields(names) {
			m[n] = k
		}
	}
	add(Inert, `cat head tail ls wc grep egrep fgrep echo printf true false pwd mkdir rmdir
		touch cp mv rm ln chmod stat file basename dirname realpath readlink date whoami id uname
		du df diff cmp sort uniq cut tr tee test [ seq nl od sha1sum sha256sum sha512sum md5sum
		base64 jq comm paste join fold tac rev sleep which tree`)
	add(Wrapper, `env command exec builtin nice nohup timeout stdbuf time setsid xargs watch
		find eval busybox`)
	// zsh is not among the shells: its words are not POSIX sh's (=cmd expands to a path,
	// extended globs), so shellwords could not read its scripts exactly.
	add(Shell, `sh bash dash ksh ksh93 mksh lksh pdksh ash yash posh rbash`)
	add(Interpreter, `python pypy perl ruby node nodejs sed gsed`)
	add(Opaque, `awk gawk mawk nawk php lua luajit tclsh wish Rscript R julia deno bun
		osascript pwsh powershell expect m4 dc ed ex vim vi nvim view vimdiff emacs sqlite3 psql
		mysql jshell groovy scala irb jruby raku perl6 zsh fish csh tcsh xonsh nu elvish guile
		racket sbcl clisp ghci runghc swipl ocaml erl escript elixir iex
		sudo doas su runuser chroot unshare nsenter setpriv systemd-run firejail bwrap proot
		fakeroot fakechroot strace ltrace valgrind perf gdb lldb script parallel taskset chrt
		ionice cgexec numactl prlimit ssh rsh flock unbuffer catchsegv at batch crontab screen
		tmux dtach setarch linux32 linux64 chpst softlimit envdir setlock daemonize
		start-stop-daemon entr watchexec nodemon direnv nix-shell sg newgrp pkexec`)
	return m
})

// runners are programs agora does not read whose ordinary use runs code or programs their
// arguments, files or configuration name: build tools run their recipes (make, go generate,
// go test), package runners run packages (npx, uvx), container tools run images. With any
// arguments they run anything.
var runners = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`make gmake bmake just task ninja cmake meson bazel bazelisk buck2
		scons rake go cargo rustc gcc cc clang tcc npx npm pnpm pnpx yarn corepack uv uvx pip pip3
		pipx poetry pipenv hatch pdm tox nox conda mamba micromamba bundle bundler gem composer
		gradle gradlew mvn mvnw sbt ant lein dotnet java javac kotlinc swift docker podman nerdctl
		kubectl helm ctr crictl buildah nix`) {
		m[n] = true
	}
	return m
})

// RunsAnything reports whether prog, given any arguments, can run any program or code: a
// wrapper, a shell, an interpreter, an opaque program, git (aliases, hooks and -c
// core.sshCommand run commands) or a build, package or container runner ([runners]).
func RunsAnything(prog string) bool {
	switch KindOf(prog) {
	case Wrapper, Shell, Interpreter, Opaque, Git:
		return true
	}
	return runners()[prog]
}

// KindOf returns how agora reads prog (a program's name, see [ProgName]).
func KindOf(prog string) Kind {
	if prog == "git" || strings.HasPrefix(prog, "git-") {
		return Git
	}
	if k, ok := programKinds()[prog]; ok {
		return k
	}
	if f := interpreterFamily(prog); f != prog {
		if k, ok := programKinds()[f]; ok {
			return k
		}
	}
	return Unread
}

// interpreterFamily is the interpreter prog is a version of ("python3.12" is "python",
// "perl5.36" "perl", "lua5.4" "lua", "php8.2" "php"), or prog.
func interpreterFamily(prog string) string {
	for _, f := range []string{"python", "pypy", "perl", "ruby", "php", "lua", "node", "tclsh"} {
		if rest, ok := strings.CutPrefix(prog, f); ok && strings.Trim(rest, "0123456789.") == "" {
			prog = f
			break
		}
	}
	switch prog {
	case "pypy":
		return "python"
	case "gsed":
		return "sed"
	case "nodejs":
		return "node"
	}
	return prog
}

// danger lists the options of an inert program that make it run a program it names.
type danger struct {
	long  []string
	short string
}

// inertPrograms are the Inert programs with such options.
var inertPrograms = sync.OnceValue(func() map[string]danger {
	return map[string]danger{
		"sort": {long: []string{"compress-program"}},
	}
})

// wrapperSpecs are the option grammars of the wrappers read by [Reading.wrapper].
var wrapperSpecs = sync.OnceValue(func() map[string]optSpec {
	return map[string]optSpec{
		"env": {flags: "i0v", args: "uCS",
			long:    []string{"ignore-environment", "null", "debug", "list-signal-handling", "help", "version"},
			longArg: []string{"unset", "chdir", "split-string"},
			longOpt: []string{"default-signal", "ignore-signal", "block-signal"}},
		"command": {flags: "pvV"},
		"exec":    {flags: "cl", args: "a"},
		"builtin": {},
		"nice":    {args: "n", numeric: true, long: []string{"help", "version"}, longArg: []string{"adjustment"}},
		"nohup":   {long: []string{"help", "version"}},
		"timeout": {flags: "v", args: "sk",
			long:    []string{"preserve-status", "foreground", "verbose", "help", "version"},
			longArg: []string{"signal", "kill-after"}},
		"stdbuf": {args: "ioe", long: []string{"help", "version"}, longArg: []string{"input", "output", "error"}},
		"time": {flags: "apqvV", args: "fo",
			long:    []string{"append", "portability", "quiet", "verbose", "version", "help"},
			longArg: []string{"format", "output"}},
		"setsid": {flags: "cfw", long: []string{"ctty", "fork", "wait", "help", "version"}},
		"xargs": {flags: "0prtxo", args: "aEdLnPsI", stuck: "eil",
			long:    []string{"null", "interactive", "no-run-if-empty", "verbose", "exit", "show-limits", "open-tty", "help", "version"},
			longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"},
			longOpt: []string{"eof", "replace", "max-lines"}},
		"watch": {flags: "bcCdeghprtwxv", args: "nq",
			long: []string{"beep", "color", "no-color", "errexit", "chgexit", "precise", "no-rerun",
				"no-title", "no-wrap", "exec", "help", "version"},
			longArg: []string{"interval", "equexit"},
			longOpt: []string{"differences"}},
	}
})

// shellSpec is the invocation grammar of bash and the POSIX shells (-c is a flag: the
// script is the first operand).
var shellSpec = sync.OnceValue(func() optSpec {
	return optSpec{flags: "abcefhiklmnprstuvxBCDEHLPT", args: "oO",
		long: []string{"login", "norc", "noprofile", "posix", "restricted", "verbose", "version",
			"help", "noediting", "debugger", "dump-strings", "dump-po-strings", "pretty-print"},
		longArg: []string{"rcfile", "init-file"}}
})

// interpreterSpecs are the grammars of the interpreters agora reads; code options mark inline
// code.
var interpreterSpecs = sync.OnceValue(func() map[string]optSpec {
	return map[string]optSpec{
		"python": {flags: "bBdEhiIOqsSuvVxPR?3", args: "WXQ", code: "c", stop: "m",
			long:    []string{"help", "version", "help-env", "help-xoptions", "help-all"},
			longArg: []string{"check-hash-based-pycs"}},
		"perl": {flags: "acnpsStTuUvwWXh", stuck: "0lCixV", args: "I", code: "eEmMdDF",
			long: []string{"help", "version"}},
		"ruby": {flags: "acdlnpsSvwyhU", stuck: "0xKTW", args: "ICErF", code: "e",
			long:    []string{"copyright", "verbose", "version", "help", "yydebug", "jit"},
			longArg: []string{"enable", "disable", "dump", "encoding", "external-encoding", "internal-encoding"}},
		"node": {flags: "cihv", args: "r", code: "ep",
			long: []string{"help", "version", "test", "watch", "no-warnings", "check", "interactive",
				"enable-source-maps", "trace-warnings", "no-deprecation", "preserve-symlinks"},
			longArg: []string{"require", "input-type", "env-file"},
			// --import and the loaders take a module specifier, which may be a data: URL:
			// code in the argument itself.
			longCode: []string{"eval", "print", "import", "loader", "experimental-loader"}},
	}
})

// sedSpec is GNU sed's grammar; options may follow operands.
var sedSpec = sync.OnceValue(func() optSpec {
	return optSpec{flags: "nrEsuz", stuck: "i", args: "efl", permute: true,
		long: []string{"quiet", "silent", "regexp-extended", "separate", "unbuffered", "null-data",
			"posix", "debug", "sandbox", "follow-symlinks", "help", "version", "zero-terminated"},
		longArg: []string{"expression", "file", "line-length"},
		longOpt: []string{"in-place"}}
})
