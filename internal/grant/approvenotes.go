package grant

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/cmdread"
)

// ApproveNotes says, for people registering or reading a grant, what its approve rules
// cannot see: a rule holds what agora reads from a call's argv (see [Proof]), so a program
// that runs code from files, a word a program also accepts spelt otherwise, or a default
// the call leaves out is not held. One note per finding, in the order of the rules; nil when
// the grant has no approve rule or nothing to say.
func ApproveNotes(s Set) []string {
	var notes []string
	add := func(format string, a ...any) {
		if n := fmt.Sprintf(format, a...); !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	var commandRules []CommandPattern
	for _, r := range s.Approve {
		if r.Command == "" {
			if slices.Contains(s.Tools, "run_command") && len(s.Commands) > 0 {
				add("rule %s holds %s calls only: a granted command that does the same work (run_command) is not held by it", r.Tool, r.Tool)
			}
			continue
		}
		p, err := ParseCommandPattern(r.Command)
		if err != nil {
			continue
		}
		commandRules = append(commandRules, p)
		ruleNotes(r.Command, p, add)
	}
	if len(commandRules) == 0 {
		return notes
	}
	for _, c := range s.Commands {
		p, err := ParseCommandPattern(c)
		if err != nil {
			continue
		}
		patternNotes(c, p, add)
	}
	return notes
}

// ruleNotes says what the rule's own words cannot see.
func ruleNotes(text string, p CommandPattern, add func(string, ...any)) {
	words := p.words[1:]
	prog := cmdread.ProgName(p.words[0])
	if prog == "git" {
		if op, _, rest, ok := gitOperation(words); ok {
			if op == "push" {
				add("rule %q: a repository on this file system can be changed without a push (git -C DIR fetch, a copy of its files); the rule holds pushes", text)
			}
			words = rest
		}
	} else if len(words) > 0 && !strings.HasPrefix(words[0], "-") && !strings.ContainsAny(words[0], "*?[") {
		words = words[1:] // the operation itself ("npm publish")
	}
	for _, w := range words {
		switch {
		case w == "*" || w == "**":
		case strings.HasPrefix(w, "-"):
			add("rule %q: option %q is held only as written; the same option spelt otherwise (a long form, a cluster such as -fu) is not: leave it out of the rule to hold every call", text, w)
		case strings.ContainsAny(w, "*?["):
			add("rule %q: %q is matched against argument text; a directory or file that holds such names (rm -r dir) is not seen", text, w)
		default:
			add("rule %q: %q is held only when the call names it; a call that leaves it to a default or configuration is not held: leave it out of the rule to hold every call", text, w)
		}
	}
}

// patternNotes says what a granted command can run that no approve rule sees.
func patternNotes(text string, p CommandPattern, add func(string, ...any)) {
	progWord := p.words[0]
	prog := cmdread.ProgName(progWord)
	switch {
	case strings.ContainsAny(progWord, "*?["):
		add("command %q: its program is a pattern; a copy or link of a held program under a name it matches is not seen by approve rules", text)
		return
	case strings.Contains(progWord, "/") && !strings.HasPrefix(progWord, "/"):
		add("command %q runs a program from the workspace: what it runs is not seen by approve rules", text)
		return
	}
	switch cmdread.KindOf(prog) {
	case cmdread.Unread:
		add("command %q: agora does not read what %s runs (a Makefile's recipes, package.json scripts, tests, a program's own files); approve rules hold its calls only when their arguments name the rule's program or hold more than names, paths, options and numbers", text, prog)
	case cmdread.Shell, cmdread.Interpreter:
		add("command %q: a script file %s runs is not seen by approve rules; inline code (-c, -e) is held by every command rule", text, prog)
	case cmdread.Opaque:
		add("command %q: every call of %s is held by every command rule, since agora cannot read what it runs", text, prog)
	case cmdread.Git:
		add("command %q: git runs hooks and commands named in configuration files (.git/config, hooks); approve rules hold a git config that sets such a key, not a file changed another way", text)
	}
}
