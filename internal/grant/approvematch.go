package grant

import (
	"fmt"
	"path"
	"strings"

	"github.com/agora-dev/agora/internal/cmdread"
)

// Proof is why a call is outside an approve rule; a call without one is held.
//
// A command rule "PROG W1 W2 ..." names an operation: the program PROG (compared by file
// name, so /usr/bin/git is git; a glob such as python* matches names) and the words that
// must appear in its arguments. A run_command call is outside the rule when agora can read
// every command its argv runs (see [cmdread.Read]: the program itself, and each command a
// wrapper, a shell script of one simple command or find -exec names; nothing opaque) and
// each of them is one of:
//
//   - another program, which agora reads whole (its grammar is known, and what it runs is
//     in the list), or whose arguments neither name PROG anywhere (quotes and backslashes
//     removed) nor hold anything but names, paths, options and numbers
//     ([cmdread.Command.Codeish]): an unread program that names PROG, or that is handed
//     code, which can name PROG without spelling it, could run it, so it is held;
//   - PROG, but its arguments lack W1 W2 ... in that order (any words may come before,
//     between and after them; a glob word matches one argument, * crossing /; * and ** are
//     no constraint, so "git push *" holds a bare "git push"). For git the first word is
//     the subcommand, read by git's own grammar (global options such as -C, -c and
//     --git-dir skipped, send-pack read as push): "git -c x=y push r HEAD:x" is git push.
//
// Steps has one entry per command, the argv's own first; Why says which case holds.
type Proof struct {
	Steps []ProofStep
}

// ProofStep is one command of a [Proof].
type ProofStep struct {
	Argv []string
	Why  string
}

// Outside returns the proof that a call of tool with argv (run_command's; nil for other
// tools) is outside r, or false when r holds the call.
func (r ApproveRule) Outside(tool string, argv []string) (Proof, bool) {
	return r.outsideOf(tool, argv, nil)
}

// outsideOf is [ApproveRule.Outside] with the argv's reading, when the caller has it (nil:
// read it here), so several rules judge one call with one reading.
func (r ApproveRule) outsideOf(tool string, argv []string, rd *cmdread.Reading) (Proof, bool) {
	if r.Tool != "" {
		if r.Tool == tool {
			return Proof{}, false
		}
		return Proof{Steps: []ProofStep{{Why: "the rule holds " + r.Tool + " calls, not " + tool}}}, true
	}
	if tool != "run_command" {
		return Proof{Steps: []ProofStep{{Why: "a command rule holds run_command calls, not " + tool}}}, true
	}
	p, err := ParseCommandPattern(r.Command)
	if err != nil {
		return Proof{}, false // an invalid rule holds everything it could mean
	}
	if rd == nil {
		read := cmdread.Read(argv)
		rd = &read
	}
	if rd.Opaque != "" {
		return Proof{}, false
	}
	var proof Proof
	for _, c := range rd.Commands {
		why, outside := p.outside(c)
		if !outside {
			return Proof{}, false
		}
		proof.Steps = append(proof.Steps, ProofStep{Argv: c.Argv, Why: why})
	}
	return proof, true
}

// outside says why command c is not p's operation, or false when it may be.
func (p CommandPattern) outside(c cmdread.Command) (string, bool) {
	prog := cmdread.ProgName(p.words[0])
	name := cmdread.ProgName(c.Argv[0])
	if c.Git != nil && strings.HasPrefix(name, "git-") {
		name = "git"
	}
	if !cmdread.ProgMatches(prog, name) {
		// A program agora does not read whole could run prog: held when its arguments name
		// it, or hold anything a program could read as code (which can name it unspelt).
		if !c.Read && (c.Mentions(prog) || c.Codeish()) {
			return "", false
		}
		if c.Read {
			return fmt.Sprintf("runs %s, not %s (agora reads %s whole)", name, prog, name), true
		}
		return fmt.Sprintf("runs %s, not %s, and its arguments do not name %s", name, prog, prog), true
	}
	words := p.words[1:]
	if c.Git != nil {
		if op, pre, rest, ok := gitOperation(words); ok {
			g := c.Git
			if g.Sub != op {
				if g.Sub == "" {
					return "git runs no subcommand", true
				}
				return fmt.Sprintf("runs git %s, not git %s", g.Sub, op), true
			}
			if missing, ok := inOrder(pre, g.Global, nil, false); !ok {
				return fmt.Sprintf("git's global options lack %q", missing), true
			}
			if missing, ok := inOrder(rest, g.Args, g.Known, c.Tail); !ok {
				return fmt.Sprintf("runs git %s without %q in its arguments", op, missing), true
			}
			return "", false
		}
	}
	if missing, ok := inOrder(words, c.Argv[1:], c.Known[1:], c.Tail); !ok {
		return fmt.Sprintf("runs %s without %q in its arguments", name, missing), true
	}
	return "", false
}

// gitOperation splits a git rule's words (after "git") at its subcommand: the first literal
// word that is not an option. ok is false when there is none (git ** holds every git call).
func gitOperation(words []string) (op string, pre, rest []string, ok bool) {
	for i, w := range words {
		if strings.HasPrefix(w, "-") {
			continue
		}
		if w == "*" || w == "**" || strings.ContainsAny(w, "*?[") {
			return "", nil, nil, false
		}
		w, _ = cmdread.GitSubcommand(w)
		return w, words[:i], words[i+1:], true
	}
	return "", nil, nil, false
}

// inOrder reports whether args hold the pattern words in order (see [Proof]); known[i]
// false makes args[i] match anything, and tail that more arguments agora cannot see follow.
// It returns the first word it could not find.
func inOrder(words, args []string, known []bool, tail bool) (string, bool) {
	j := 0
	for _, w := range words {
		if w == "*" || w == "**" {
			continue
		}
		found := false
		for ; j < len(args) && !found; j++ {
			found = (known != nil && !known[j]) || wordMatches(w, args[j])
		}
		if !found {
			return w, tail
		}
	}
	return "", true
}

// wordMatches reports whether arg is pattern word w: equal, or matching it as a glob in
// which * also crosses "/".
func wordMatches(w, arg string) bool {
	if !strings.ContainsAny(w, `*?[\`) {
		return w == arg
	}
	ok, _ := path.Match(strings.ReplaceAll(w, "/", "\x00"), strings.ReplaceAll(arg, "/", "\x00"))
	return ok
}
