package cmdread

import (
	"slices"
	"strings"
	"sync"
)

// git's command line as agora reads it for approve rules: the global options (read exactly,
// as git reads them: no clusters, no abbreviations), then the subcommand, which must be a
// git builtin agora knows runs no command named in its arguments. Everything else could be
// any command and makes the call unreadable (held by every command rule):
//
//   - a subcommand agora does not list: an alias (from -c alias.*, or from any config file,
//     which the repository's own .Git/config is) or an external git-* program;
//   - -c or --config-env with a key that is not known to be inert (alias.*, include.*,
//     core.sshCommand, core.pager, core.fsmonitor, ... make git run what they name);
//   - --exec-path=DIR (where git finds its helpers) and any global option agora does not know;
//   - an option of the subcommand that runs a program it names (rebase --exec, grep -O,
//     fetch --upload-pack, clone -c, push --receive-pack, archive --exec) and any argument
//     with "::" (a remote helper: ext::COMMAND runs COMMAND);
//   - a `git config` that writes a key that is not inert (git config alias.p push, then git p).
//
// What git runs from configuration and hooks stored in files is not read.

// GitCall is a git command line agora could read.
type GitCall struct {
	Global []string // the global options, as written
	Sub    string   // the subcommand, canonical (send-pack is push); "" when none
	Args   []string // the words after the subcommand
	Known  []bool   // Known[i]: Args[i] is what will run (false: find's {} or xargs' input)
}

// gitSubcommands are git's builtins whose arguments name no command to run, each with its
// options that do (long names, short letters), and the canonical name of synonyms.
type gitSub struct {
	long  []string
	short string
	canon string
}

var gitSubcommands = sync.OnceValue(func() map[string]gitSub {
	inert := strings.Fields(`add am annotate apply blame branch bugreport bundle cat-file
		check-attr check-ignore check-mailmap check-ref-format checkout checkout-index cherry
		cherry-pick clean column commit commit-graph commit-tree count-objects describe diagnose
		diff diff-files diff-index diff-tree fast-export fmt-merge-msg for-each-ref
		format-patch fsck fsck-objects gc get-tar-commit-id hash-object help index-pack init
		init-db interpret-trailers log ls-files ls-tree mailinfo mailsplit merge merge-base
		merge-file merge-tree mktag mktree multi-pack-index mv name-rev notes pack-objects
		pack-redundant pack-refs patch-id pickaxe prune prune-packed range-diff read-tree
		reflog remote repack replace rerere reset restore rev-list rev-parse revert rm shortlog
		show show-branch show-index show-ref sparse-checkout stage stash status stripspace
		switch symbolic-ref tag unpack-file unpack-objects update-index update-ref
		update-server-info var verify-commit verify-pack verify-tag version whatchanged
		worktree write-tree`)
	m := make(map[string]gitSub, len(inert)+16)
	for _, s := range inert {
		m[s] = gitSub{}
	}
	for alias, canon := range map[string]string{"stage": "add", "init-db": "init", "pickaxe": "blame", "fsck-objects": "fsck"} {
		m[alias] = gitSub{canon: canon}
	}
	m["config"] = gitSub{} // read by gitConfigWrites
	m["grep"] = gitSub{long: []string{"open-files-in-pager"}, short: "O"}
	m["rebase"] = gitSub{long: []string{"exec"}, short: "x"}
	m["fetch"] = gitSub{long: []string{"upload-pack"}}
	m["fetch-pack"] = gitSub{long: []string{"upload-pack", "exec"}}
	m["pull"] = gitSub{long: []string{"upload-pack"}}
	m["ls-remote"] = gitSub{long: []string{"upload-pack"}}
	m["clone"] = gitSub{long: []string{"upload-pack", "config", "template"}, short: "uc"}
	m["archive"] = gitSub{long: []string{"exec", "remote"}}
	m["push"] = gitSub{long: []string{"receive-pack", "exec"}}
	m["send-pack"] = gitSub{long: []string{"receive-pack", "exec"}, canon: "push"}
	return m
})

// gitGlobalFlags and gitGlobalArgs are git's global options (git(1)); an option with an
// argument is "--name=V" or "--name V" ("-C V", "-c V" only separate).
var (
	gitGlobalFlags = []string{"-p", "--paginate", "-P", "--no-pager", "--no-replace-objects",
		"--no-lazy-fetch", "--no-optional-locks", "--no-advice", "--bare", "--literal-pathspecs",
		"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs"}
	gitGlobalArgs  = []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--attr-source"}
	gitGlobalPrint = []string{"--version", "-v", "--html-path", "--man-path", "--info-path", "--exec-path"}
)

// inertGitKeys are configuration keys (lower case; "section.*" for a whole section) whose
// values never name a command, an alias or another file to read.
var inertGitKeys = []string{"user.name", "user.email", "user.useconfigonly", "color.*", "advice.*",
	"core.quotepath", "core.autocrlf", "core.safecrlf", "core.eol", "core.filemode",
	"core.ignorecase", "init.defaultbranch", "safe.directory", "pull.rebase", "pull.ff",
	"merge.ff", "fetch.prune", "column.ui", "status.short", "status.branch", "diff.renames",
	"log.decorate"}

// inertGitKey reports whether setting key (NAME or NAME=VALUE) can make git run nothing.
func inertGitKey(kv string) bool {
	key, _, _ := strings.Cut(kv, "=")
	key = strings.ToLower(key)
	section, _, _ := strings.Cut(key, ".")
	return slices.Contains(inertGitKeys, key) || slices.Contains(inertGitKeys, section+".*")
}

// readGit reads a git command line (argv[0] is git, or git-SUB for a builtin run by its own
// name); it returns the call, or why it could be any command.
func readGit(c Command) (*GitCall, string) {
	prog := ProgName(c.Argv[0])
	g := &GitCall{}
	i := 1
	if sub, ok := strings.CutPrefix(prog, "git-"); ok {
		if _, known := gitSubcommands()[sub]; !known {
			return nil, "program " + prog + " is a git helper agora does not read"
		}
		g.Sub = sub
	} else {
		for g.Sub == "" && i < len(c.Argv) {
			if !c.Known[i] {
				return nil, "a git option or subcommand is a word agora cannot know"
			}
			w := c.Argv[i]
			switch {
			case !strings.HasPrefix(w, "-"):
				g.Sub = w
			case w == "--help" || w == "-h":
				g.Sub = "help"
			default:
				next, printOnly, why := g.readGlobal(c, i)
				if why != "" {
					return nil, why
				}
				if printOnly {
					return g, ""
				}
				i = next
				continue
			}
			i++
		}
		if g.Sub == "" {
			if c.Tail {
				return nil, "git's subcommand comes from input agora cannot see"
			}
			return g, "" // git alone prints its usage
		}
	}
	spec, known := gitSubcommands()[g.Sub]
	if !known {
		return nil, "git " + quoteWord(g.Sub) + " is not a git builtin agora knows: it may be an alias or an external command"
	}
	g.Args, g.Known = c.Argv[i:], c.Known[i:]
	if why := g.checkArgs(spec, c.Tail); why != "" {
		return nil, why
	}
	if g.Sub == "config" {
		if why := gitConfigWrites(g.Args, c.Tail || slices.Contains(g.Known, false)); why != "" {
			return nil, why
		}
	}
	if spec.canon != "" {
		g.Sub = spec.canon
	}
	return g, ""
}

// readGlobal reads the global option argv[i] into g; it returns the index of the next word,
// whether the option prints something and git exits, and why the call cannot be read ("").
func (g *GitCall) readGlobal(c Command, i int) (next int, printOnly bool, why string) {
	argv := c.Argv
	w := argv[i]
	name, val, hasVal := strings.Cut(w, "=")
	switch {
	case slices.Contains(gitGlobalFlags, w):
		g.Global = append(g.Global, w)
		return i + 1, false, ""
	case name == "--list-cmds" && hasVal, slices.Contains(gitGlobalPrint, w):
		return i + 1, true, ""
	case name == "--exec-path" && hasVal:
		return i, false, "git --exec-path=DIR runs git's helpers from DIR"
	case slices.Contains(gitGlobalArgs, name) && !(hasVal && (name == "-C" || name == "-c")):
		if !hasVal {
			if i+1 >= len(argv) {
				return i, false, "git " + name + " without its argument"
			}
			i++
			if !c.Known[i] {
				return i, false, "the argument of git " + name + " is a word agora cannot know"
			}
			val = argv[i]
		}
		if (name == "-c" || name == "--config-env") && !inertGitKey(val) {
			return i, false, "git " + name + " " + quoteWord(val) + " sets configuration that can make git run a command (an alias, a pager, an ssh command)"
		}
		g.Global = append(g.Global, name, val)
		return i + 1, false, ""
	}
	return i, false, "unknown git option " + quoteWord(w)
}

// checkArgs refuses the arguments of a subcommand that could name a command to run.
func (g *GitCall) checkArgs(spec gitSub, tail bool) string {
	hasDanger := len(spec.long) > 0 || spec.short != ""
	if hasDanger && (tail || slices.Contains(g.Known, false)) {
		return "git " + g.Sub + " has options that run a command, and some of its arguments come from input agora cannot see"
	}
	for _, a := range g.Args {
		if strings.Contains(a, "::") {
			return "git argument " + quoteWord(a) + " names a remote helper (ext::COMMAND runs COMMAND)"
		}
	}
	for _, a := range g.Args {
		if a == "--" {
			break
		}
		if dangerousOption(a, spec.long, spec.short) {
			return "git " + g.Sub + " " + quoteWord(a) + " runs a command it names"
		}
	}
	return ""
}

// dangerousOption reports whether word could be one of the options long (by name or an
// abbreviation of it) or short (a letter of a cluster).
func dangerousOption(word string, long []string, short string) bool {
	if name, ok := strings.CutPrefix(word, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		if name == "" {
			return false
		}
		return slices.ContainsFunc(long, func(l string) bool { return strings.HasPrefix(l, name) })
	}
	if len(word) > 1 && word[0] == '-' && short != "" {
		return strings.ContainsAny(word[1:], short)
	}
	return false
}

// gitConfigWrites returns why a `git config` call with args could make git run a command
// later (it writes a key that is not inert, or edits the file), or "" for a read or an inert
// write. unsure: some words come from input agora cannot see.
func gitConfigWrites(args []string, unsure bool) string {
	if unsure {
		return "git config with arguments agora cannot see may write any key"
	}
	reads := []string{"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "--list", "-l"}
	harmless := []string{"--show-origin", "--show-scope", "--name-only", "--null", "-z", "--bool",
		"--int", "--bool-or-int", "--path", "--expiry-date", "--local", "--global", "--system",
		"--worktree", "--includes", "--no-includes", "--fixed-value"}
	withArg := []string{"--file", "-f", "--blob", "--type", "--default"}
	var operands []string
	read := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(a, "=")
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case slices.Contains(reads, a):
			read = true
		case slices.Contains(harmless, a):
		case slices.Contains(withArg, name):
			if !hasVal {
				i++
			}
		case strings.HasPrefix(a, "-"):
			return "git config " + quoteWord(a) + " may write or edit the configuration"
		default:
			operands = append(operands, a)
		}
	}
	if read || len(operands) <= 1 {
		return ""
	}
	key := operands[0]
	switch operands[0] {
	case "get", "list":
		return ""
	case "set":
		key = operands[1]
	}
	if !inertGitKey(key) {
		return "git config writes " + quoteWord(key) + ", which can make git run a command later (an alias, a hook path, a pager)"
	}
	return ""
}

// GitSubcommand returns the canonical name of git subcommand word (send-pack is push,
// stage is add) and whether agora knows it as a git builtin.
func GitSubcommand(word string) (string, bool) {
	s, ok := gitSubcommands()[word]
	if ok && s.canon != "" {
		return s.canon, true
	}
	return word, ok
}
