package cmdread

import (
	"cmp"
	"path"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/shellwords"
)

// Limits of a Reading: past them the argv is opaque.
const (
	maxReadDepth    = 8
	maxReadCommands = 64
)

// Command is one program run agora read from a call's argv.
type Command struct {
	Argv  []string
	Known []bool // Known[i]: Argv[i] is what will run (false: find's {}, xargs' replace string)
	Tail  bool   // arguments agora cannot see follow Argv (xargs appends its input)
	// Read: agora knows the program's grammar, and every command it runs from its own
	// arguments is in the reading too. An unread program (make, a script, a program agora
	// has no table for) could run a program its arguments mention.
	Read bool
	Git  *GitCall // git's reading, for git
}

// Reading is what agora tells from an argv about the commands it runs.
type Reading struct {
	// Commands are the commands read, the argv's own first.
	Commands []Command
	// Opaque says why the argv could run a command agora cannot read from it; "" if none.
	// A reading with Opaque set is incomplete: Commands lists what was read before.
	Opaque string
}

func newCommand(argv []string) Command {
	known := make([]bool, len(argv))
	for i := range known {
		known[i] = true
	}
	return Command{Argv: argv, Known: known}
}

// Read reads argv (a call's own) into the commands it runs. An empty argv is opaque.
func Read(argv []string) Reading {
	var r Reading
	if len(argv) == 0 {
		r.Opaque = "empty argv"
		return r
	}
	r.read(newCommand(argv), 0)
	return r
}

// read adds c, and every command c runs from its arguments, to r.
func (r *Reading) read(c Command, depth int) {
	if r.Opaque != "" {
		return
	}
	if depth > maxReadDepth || len(r.Commands) >= maxReadCommands {
		r.Opaque = "commands nested deeper than agora reads"
		return
	}
	if len(c.Argv) == 0 {
		return
	}
	if !c.Known[0] {
		r.Opaque = "the program is a word agora cannot know (find's {} or xargs' input)"
		return
	}
	idx := len(r.Commands)
	r.Commands = append(r.Commands, c)
	prog := ProgName(c.Argv[0])
	kind := KindOf(prog)
	if c.Tail && kind != Inert && kind != Git {
		r.Opaque = prog + " gets arguments from input agora cannot see (xargs)"
		return
	}
	switch kind {
	case Wrapper:
		r.Commands[idx].Read = true
		r.wrapper(prog, c, depth)
	case Shell:
		r.Commands[idx].Read = r.shell(prog, c, depth)
	case Interpreter:
		r.Commands[idx].Read = r.interpreter(prog, c)
	case Opaque:
		r.Opaque = prog + " runs code or commands agora does not read"
	case Git:
		g, why := readGit(c)
		if why != "" {
			r.Opaque = why
			return
		}
		r.Commands[idx].Read, r.Commands[idx].Git = true, g
	case Inert:
		r.Commands[idx].Read = true
		if why := inertDanger(prog, c); why != "" {
			r.Opaque = why
		}
	}
}

// ProgName is the name a program is known by: the last element of its path.
func ProgName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// sub returns the command c runs from its words from i on, with the same knowledge of them.
func (c Command) sub(i int) Command {
	if i >= len(c.Argv) {
		return Command{}
	}
	return Command{Argv: c.Argv[i:], Known: c.Known[i:], Tail: c.Tail}
}

// allKnown reports whether every word of c from i on is known and nothing follows.
func (c Command) allKnown(from int) bool {
	return c.allKnownIn(from, len(c.Known)) && !c.Tail
}

// allKnownIn reports whether the words from, ..., to-1 of c are known.
func (c Command) allKnownIn(from, to int) bool {
	for _, k := range c.Known[min(from, len(c.Known)):min(to, len(c.Known))] {
		if !k {
			return false
		}
	}
	return true
}

// wrapper reads the command a wrapper runs.
func (r *Reading) wrapper(prog string, c Command, depth int) {
	args := c.Argv[1:]
	switch prog {
	case "find":
		r.find(c, depth)
		return
	case "eval":
		if !c.allKnown(1) {
			r.Opaque = "eval of words agora cannot know"
			return
		}
		r.script(strings.Join(args, " "), depth)
		return
	case "busybox":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			r.read(c.sub(1), depth+1)
		}
		return
	}
	spec := wrapperSpecs()[prog]
	o, ok := spec.parse(args)
	if !ok {
		r.Opaque = prog + " with options agora does not read"
		return
	}
	start := len(c.Argv) - len(o.operands) // index of the first operand
	if !c.allKnownIn(1, start) {
		// An unknown word among the options could be any option (env -S ...).
		r.Opaque = prog + "'s options include a word agora cannot know"
		return
	}
	switch prog {
	case "env":
		// "-" alone is -i; then NAME=VALUE words, then the command.
		for start < len(c.Argv) && (c.Argv[start] == "-" || strings.Contains(c.Argv[start], "=") || !c.Known[start]) {
			if !c.Known[start] || !inertEnv(c.Argv[start]) {
				r.Opaque = "env sets " + quoteWord(c.Argv[start]) + ", which can make a program run other code"
				return
			}
			start++
		}
		if len(o.opts["S"]) > 0 || len(o.opts["split-string"]) > 0 {
			r.Opaque = "env -S splits a string into a command line agora does not read"
			return
		}
	case "command":
		if len(o.opts["v"]) > 0 || len(o.opts["V"]) > 0 {
			return // describes the command, runs nothing
		}
	case "timeout":
		start++ // the duration
	case "xargs":
		r.xargs(c, start, o, depth)
		return
	case "watch":
		if len(o.opts["x"]) == 0 && len(o.opts["exec"]) == 0 {
			if !c.allKnown(start) {
				r.Opaque = "watch runs words agora cannot know through sh -c"
				return
			}
			r.script(strings.Join(c.Argv[start:], " "), depth)
			return
		}
	}
	r.read(c.sub(start), depth+1)
}

// xargs reads the command xargs runs: its words, then the input it reads (unknown), or with
// -I the input in place of the replace string.
func (r *Reading) xargs(c Command, start int, o optResult, depth int) {
	inner := c.sub(start)
	if len(inner.Argv) == 0 {
		inner = newCommand([]string{"echo"})
	}
	inner.Known = append([]bool(nil), inner.Known...)
	replace := ""
	for _, k := range []string{"I", "i", "replace"} {
		for _, v := range o.opts[k] {
			v = cmp.Or(v, "{}")
			replace = v
		}
	}
	if replace != "" {
		for i, w := range inner.Argv {
			if strings.Contains(w, replace) {
				inner.Known[i] = false
			}
		}
	}
	inner.Tail = true // even with -I (-L/-n may add more); agora cannot tell
	r.read(inner, depth+1)
}

// find reads the commands of find's -exec, -execdir, -ok and -okdir actions; {} in their
// words is a file name agora cannot know.
func (r *Reading) find(c Command, depth int) {
	for i := 1; i < len(c.Argv); i++ {
		switch c.Argv[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		end := i + 1
		for end < len(c.Argv) && c.Argv[end] != ";" && c.Argv[end] != "+" {
			end++
		}
		if end == len(c.Argv) {
			r.Opaque = "find " + c.Argv[i] + " without its terminating ; or +"
			return
		}
		inner := Command{Argv: c.Argv[i+1 : end], Known: append([]bool(nil), c.Known[i+1:end]...)}
		for j, w := range inner.Argv {
			if strings.Contains(w, "{}") {
				inner.Known[j] = false
			}
		}
		if len(inner.Argv) == 0 {
			r.Opaque = "find " + c.Argv[i] + " with no command"
			return
		}
		r.read(inner, depth+1)
		i = end
	}
}

// shell reads what a POSIX shell runs: with -c, its script when that is one simple command;
// otherwise a script file, which agora cannot see. It returns whether the shell's call was
// read whole (false for a script file: the shell is then an unread program).
func (r *Reading) shell(prog string, c Command, depth int) bool {
	if !c.allKnown(1) {
		r.Opaque = prog + " with words agora cannot know"
		return true
	}
	args := make([]string, len(c.Argv)-1)
	for i, a := range c.Argv[1:] {
		switch {
		case a == "-": // ends the options, as -- does
			a = "--"
		case strings.HasPrefix(a, "+"): // +o NAME, +x: the same grammar as -o, -x
			a = "-" + a[1:]
		}
		args[i] = a
	}
	o, ok := shellSpec().parse(args)
	if !ok {
		r.Opaque = prog + " with options agora does not read"
		return true
	}
	if len(o.opts["c"]) == 0 {
		return len(o.operands) == 0 // a script file, or the (empty) input
	}
	if len(o.operands) > 0 { // sh -c without a script fails
		r.script(o.operands[0], depth)
	}
	return true
}

// script reads a shell script: one simple command of literal words is read as its argv;
// anything else is opaque.
func (r *Reading) script(s string, depth int) {
	words, ok := scriptWords(s)
	if !ok {
		r.Opaque = "a shell script agora cannot read as one simple command: " + quoteWord(s)
		return
	}
	if len(words) == 0 {
		return
	}
	r.read(newCommand(words), depth+1)
}

// scriptWords returns the argv of a shell script that is one simple command of literal
// words, as sh would run it ([shellwords.Split]), or false.
func scriptWords(s string) ([]string, bool) {
	words, err := shellwords.Split(s)
	return words, err == nil
}

// interpreter reads an interpreter's call: inline code makes it opaque; a script file is
// code agora cannot see (the interpreter is read like an unread program). It returns whether
// the call was read whole: only a sed agora read runs nothing it cannot see.
func (r *Reading) interpreter(prog string, c Command) bool {
	if !c.allKnown(1) {
		r.Opaque = prog + " with words agora cannot know"
		return false
	}
	family := interpreterFamily(prog)
	if family == "sed" {
		return r.sed(c)
	}
	spec, ok := interpreterSpecs()[family]
	if !ok {
		r.Opaque = prog + " runs code agora does not read"
		return false
	}
	o, ok := spec.parse(c.Argv[1:])
	if !ok {
		r.Opaque = prog + " with options agora does not read"
		return false
	}
	if len(o.code) > 0 {
		r.Opaque = prog + " runs inline code agora does not read"
	}
	return false
}

// sed reads a sed call: GNU sed's e command and s///e flag run a shell command, so a script
// (from -e or the first operand) holding the letter e is opaque unless --sandbox refuses them.
// It returns whether the call was read whole: a script from a file (-f) is not.
func (r *Reading) sed(c Command) bool {
	o, ok := sedSpec().parse(c.Argv[1:])
	if !ok {
		r.Opaque = "sed with options agora does not read"
		return false
	}
	if len(o.opts["sandbox"]) > 0 {
		return true
	}
	fromFile := len(o.opts["f"]) > 0 || len(o.opts["file"]) > 0
	scripts := append(o.opts["e"], o.opts["expression"]...)
	if len(scripts) == 0 && !fromFile && len(o.operands) > 0 {
		scripts = o.operands[:1]
	}
	for _, s := range scripts {
		if strings.ContainsRune(s, 'e') {
			r.Opaque = "sed script " + quoteWord(s) + " may run a command (GNU sed's e)"
			return false
		}
	}
	return !fromFile
}

// inertEnv reports whether env's word w ("-", or NAME=VALUE) sets nothing that makes a
// program run other code.
func inertEnv(w string) bool {
	if w == "-" {
		return true
	}
	name, _, _ := strings.Cut(w, "=")
	switch name {
	case "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES", "CI",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
		"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// inertDanger says why a call of an inert program could run a command after all (an option
// that names a program), or "".
func inertDanger(prog string, c Command) string {
	d, ok := inertPrograms()[prog]
	if !ok || (len(d.long) == 0 && d.short == "") {
		return ""
	}
	if !c.allKnown(1) {
		return prog + " has options that run a command, and some of its arguments come from input agora cannot see"
	}
	for _, a := range c.Argv[1:] {
		if a == "--" {
			break
		}
		if dangerousOption(a, d.long, d.short) {
			return prog + " " + quoteWord(a) + " runs a program it names"
		}
	}
	return ""
}

// Mentions reports whether a word of c names prog (a path whose last element is prog, or
// prog as a word of a command line in one argument, quotes and backslashes removed): the
// program's own name too, since "./git-wrapper" or a file named "git push" could run it.
func (c Command) Mentions(prog string) bool {
	var word []byte
	for i, a := range c.Argv {
		if !c.Known[i] {
			return true // agora cannot tell
		}
		// The words of a, quotes and backslashes dropped (a shell would drop them).
		word = word[:0]
		for j := 0; j <= len(a); j++ {
			if j < len(a) && (a[j] == '"' || a[j] == '\'' || a[j] == '\\') {
				continue
			}
			if j < len(a) && nameChar(a[j]) {
				word = append(word, a[j])
				continue
			}
			if len(word) > 0 && ProgMatches(prog, string(word)) {
				return true
			}
			word = word[:0]
		}
	}
	return c.Tail
}

// Codeish reports whether an argument of c (after the program) holds a byte that makes it
// more than a name, a path, an option, a number or a list of them: a blank, a quote, a
// backslash, a bracket, $, `, ;, |, &, <, >, *, ?, !, #, ~, %, a control character. A program
// agora does not read whole may read such an argument as code (make --eval, tar
// --checkpoint-action=exec=, python -m timeit -s, a data: URL), and code can name a program
// without spelling it ('gi'+'t', $(printf gi)t, /usr/bin/gi?, bytes.fromhex): so [Mentions]
// proves nothing of it. An argument agora cannot know, or one that
// follows unseen, is codeish too.
func (c Command) Codeish() bool {
	for i, a := range c.Argv {
		if i == 0 {
			continue
		}
		if !c.Known[i] {
			return true
		}
		for j := 0; j < len(a); j++ {
			if !plainChar(a[j]) {
				return true
			}
		}
	}
	return c.Tail
}

// plainChar reports whether b may appear in an argument [Command.Codeish] takes for data.
func plainChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("_.,/:=@+-", b) >= 0
}

// nameChar reports whether b is part of a word for [Command.Mentions]; any other byte
// separates words.
func nameChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '+' || b >= 0x80
}

// ProgMatches reports whether a program named name is pattern: a name, or a glob over
// names (path.Match).
func ProgMatches(pattern, name string) bool {
	if pattern == name {
		return true
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// quoteWord quotes w for a reason, cut to 80 bytes.
func quoteWord(w string) string {
	if len(w) > 80 {
		return strconv.Quote(w[:80]) + "..."
	}
	return strconv.Quote(w)
}
