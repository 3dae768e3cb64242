package suggest

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// minAgree is how many distinct observations must agree before a command's last word or a
// request's path is generalised (see the package doc).
const minAgree = 3

// Limits of a proposal: a grant past them cannot be reviewed, and is refused.
const (
	maxCommands = 256
	maxRules    = 256
)

// ErrTooMuch is returned when the evidence holds more than a reviewable grant.
var ErrTooMuch = errors.New("the evidence holds more distinct commands, hosts or requests than a grant a person can review")

// launchers run code or another program they are given: a pattern that generalises their
// arguments grants whatever that code does. Compared by the program's base name without a
// version suffix ("ruby3.2" is "ruby", "lua5.4" is "lua": [programName]).
var launchers = []string{
	// shells
	"sh", "bash", "dash", "zsh", "ksh", "fish", "ash", "csh", "tcsh", "mksh", "oksh", "yash", "posh",
	"rbash", "pwsh", "powershell", "elvish", "nu", "xonsh", "busybox", "toybox",
	// wrappers that run the program they are given
	"env", "xargs", "sudo", "doas", "su", "runuser", "pkexec", "nice", "nohup", "timeout", "time",
	"exec", "eval", "command", "builtin", "strace", "ltrace", "valgrind", "gdb", "lldb", "chroot",
	"setsid", "stdbuf", "ionice", "taskset", "chrt", "prlimit", "unshare", "nsenter", "firejail",
	"systemd-run", "tmux", "screen", "flock", "watch", "parallel", "script", "expect", "bwrap",
	// interpreters and runners of source
	"python", "pypy", "node", "nodejs", "deno", "bun", "tsx", "ts-node", "perl", "raku", "ruby",
	"php", "lua", "luajit", "tclsh", "wish", "osascript", "rscript", "r", "julia", "java", "jshell",
	"groovy", "kotlin", "scala", "elixir", "iex", "escript", "erl", "racket", "guile", "sbcl",
	"runghc", "runhaskell", "dotnet", "awk", "gawk", "mawk", "sed", "vim", "nvim", "vi", "ex",
	"emacs", "ed",
	// package and task runners that run what they are given
	"find", "ssh", "git", "make", "npx", "uvx", "uv", "pipx", "poetry", "pipenv", "conda", "mamba",
	"docker", "podman", "kubectl",
}

// programName is argv0 as launchers are compared: its base name, lower case, without a
// version suffix of digits and dots ("/usr/bin/python3.12" is "python", "node20" is "node").
func programName(argv0 string) string {
	name := strings.ToLower(path.Base(argv0))
	if trimmed := strings.TrimRight(name, "0123456789."); trimmed != "" {
		name = trimmed
	}
	return name
}

// codeFlags are words that make the next one code to run.
var codeFlags = []string{"-c", "-e", "-E", "--eval", "-exec", "-execdir", "--exec", "-x", "-lc", "-ic", "-p", "-r", "--command", "--run"}

// Options tune a proposal.
type Options struct {
	// Narrow proposes literals only: no command or path is generalised.
	Narrow bool
}

// Item is one grant of a proposal as people read it.
type Item struct {
	// Kind is "tool", "command" or "egress".
	Kind string `json:"kind"`
	// Grant is the item as capability.yaml spells it (an egress rule in its summary form).
	Grant string `json:"grant"`
	// Text is the plain-language line: "runs `go test ./...`".
	Text string `json:"text"`
	// New is set when the current grant does not already hold it.
	New bool `json:"new"`
	// Basis is "observed", "generalised" (from Seen distinct observations) or "kept" (from
	// the dispatches' grants: the audit does not hold the calls' detail).
	Basis string `json:"basis"`
	// Seen is how many observations stand behind it (0 for kept items).
	Seen int `json:"seen"`
}

// Proposal is a proposed grant and what people need to review it.
type Proposal struct {
	Grant grant.Set `json:"grant"`
	Items []Item    `json:"items"`
	// Refused is evidence not proposed, with why; RefusedMore counts what was not listed.
	Refused     []Refusal `json:"refused"`
	RefusedMore int       `json:"refused_more,omitempty"`
	// ProxyRefused is what the agent tried and the egress proxy refused (connections and
	// requests), in learn and plain dispatches alike: never proposed, listed so a person
	// sees it apart from what the work used. ProxyRefusedMore counts what was not listed.
	ProxyRefused     []Refusal `json:"proxy_refused"`
	ProxyRefusedMore int       `json:"proxy_refused_more,omitempty"`
	Notes            []string  `json:"notes"`
	Diff             Diff      `json:"diff"`
	Dispatches       int       `json:"dispatches"`
	Entries          int       `json:"entries"`
}

// Propose builds the grant the evidence supports, and its diff against current (the
// subagent's grant now).
func Propose(ev *Evidence, current grant.Set, opts Options) (*Proposal, error) {
	if ev.tooMuch {
		return nil, fmt.Errorf("%w (more than %d distinct of one kind); suggest from fewer dispatches", ErrTooMuch, maxDistinct)
	}
	current, _ = current.Narrow(current) // normal form
	p := &Proposal{Items: []Item{}, Refused: slices.Clone(ev.refused), RefusedMore: ev.refusedMore,
		ProxyRefused: slices.Clone(ev.proxyRefused), ProxyRefusedMore: ev.proxyRefusedMore, Notes: slices.Clone(ev.notes),
		Dispatches: ev.dispatches, Entries: ev.entries}
	if p.Refused == nil {
		p.Refused = []Refusal{}
	}
	if p.ProxyRefused == nil {
		p.ProxyRefused = []Refusal{}
	}
	if p.Notes == nil {
		p.Notes = []string{}
	}
	var g grant.Set
	for _, t := range slices.Sorted(maps.Keys(ev.tools)) {
		g.Tools = append(g.Tools, t)
		p.Items = append(p.Items, Item{Kind: "tool", Grant: t, Text: "uses the tool " + t, New: !slices.Contains(current.Tools, t),
			Basis: "observed", Seen: ev.tools[t].n})
	}
	cmds := proposeCommands(ev, current, opts)
	for _, c := range cmds {
		g.Commands = append(g.Commands, c.Grant)
	}
	rules, ruleItems := proposeRules(ev, current, opts)
	g.Egress = rules
	if len(g.Commands) > maxCommands || len(g.Egress) > maxRules {
		return nil, fmt.Errorf("%w: %d command patterns and %d egress rules; at most %d and %d", ErrTooMuch, len(g.Commands), len(g.Egress), maxCommands, maxRules)
	}
	p.Items = append(p.Items, cmds...)
	p.Items = append(p.Items, ruleItems...)
	// Approvals only hold calls back for a person: the current grant's are kept, so that a
	// subagent moved onto the proposal never loses one.
	g.Approve = current.Approve
	for _, r := range current.Approve {
		p.Items = append(p.Items, Item{Kind: "approve", Grant: r.String(), Basis: "kept",
			Text: "a person approves " + approveText(r) + " before it runs (kept from the current grant: a suggestion never drops an approval)"})
	}
	norm, err := g.Narrow(g)
	if err != nil {
		return nil, fmt.Errorf("the proposal does not read as a grant: %w", err)
	}
	// An empty list is "none": a proposal never inherits through a nil.
	p.Grant = norm
	p.Diff = diff(current, norm)
	return p, nil
}

// proposeCommands returns the command items: literals, generalisations and kept patterns.
func proposeCommands(ev *Evidence, current grant.Set, opts Options) []Item {
	var out []Item
	done := map[string]bool{} // argv keys covered by a generalisation
	if !opts.Narrow {
		for _, gen := range generalise(ev) {
			out = append(out, gen.item(current))
			for _, k := range gen.keys {
				done[k] = true
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ev.commands)) {
		if done[k] {
			continue
		}
		c := ev.commands[k]
		pat := literal(c.argv)
		out = append(out, Item{Kind: "command", Grant: pat, Text: "runs `" + strings.Join(c.argv, " ") + "`",
			New: !grant.CommandAllowed(current.Commands, c.argv), Basis: "observed", Seen: c.n})
	}
	for _, k := range slices.Sorted(maps.Keys(ev.keptCommands)) {
		if slices.ContainsFunc(out, func(it Item) bool { return it.Grant == k }) {
			continue
		}
		out = append(out, Item{Kind: "command", Grant: k, Text: "runs what `" + k + "` allows (kept: the audit holds only a hash of the calls it admitted)",
			New: !slices.Contains(current.Commands, k), Basis: "kept"})
	}
	slices.SortFunc(out, func(a, b Item) int { return strings.Compare(a.Grant, b.Grant) })
	return out
}

// literal writes argv as a pattern that matches argv only: each glob character escaped.
func literal(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = escape(w)
	}
	return strings.Join(words, " ")
}

func escape(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case '*', '?', '[', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	return b.String()
}

type generalisation struct {
	pattern string
	keys    []string
	argvs   [][]string
	seen    int
}

func (g generalisation) item(current grant.Set) Item {
	newItem := !slices.Contains(current.Commands, g.pattern)
	return Item{Kind: "command", Grant: g.pattern, New: newItem, Basis: "generalised", Seen: g.seen,
		Text: fmt.Sprintf("runs `%s` (generalised from %d distinct commands seen, such as `%s`; the last word is any name directly under its directory, not one starting with \".\")", g.pattern, len(g.argvs), strings.Join(g.argvs[0], " "))}
}

// nameGlob ends a generalised last word: one name directly under its directory that starts
// with neither "." nor "/" (so never "..", ".", a dotfile, or a doubled slash before "..").
const nameGlob = "[^./]*"

// generalise finds the argvs whose last words may become one glob (see the package doc).
func generalise(ev *Evidence) []generalisation {
	groups := map[string][]string{} // fixed words -> argv keys
	for k, c := range ev.commands {
		if len(c.argv) < 2 || !generalisable(c.argv) {
			continue
		}
		fixed := strings.Join(c.argv[:len(c.argv)-1], "\x00")
		groups[fixed] = append(groups[fixed], k)
	}
	var out []generalisation
	for _, fixed := range slices.Sorted(maps.Keys(groups)) {
		keys := groups[fixed]
		slices.Sort(keys)
		if len(keys) < minAgree {
			continue
		}
		last := make([]string, len(keys))
		for i, k := range keys {
			a := ev.commands[k].argv
			last[i] = a[len(a)-1]
		}
		prefix := dirPrefix(last)
		// Never "/" in any spelling: "//", "/./" and "/tmp/../" are the root too.
		if prefix == "" || path.Clean(prefix) == "/" {
			continue
		}
		argv0 := ev.commands[keys[0]].argv
		// Not "*": path.Match's "*" matches ".." and ".", so "rm -rf build/*" would admit
		// "rm -rf build/.." (the directory above), which no observation did. nameGlob
		// admits a name directly under prefix that starts with neither "." nor "/".
		pat := literal(argv0[:len(argv0)-1]) + " " + escape(prefix) + nameGlob
		cp, err := grant.ParseCommandPattern(pat)
		if err != nil || cp.RunsAnyLine() {
			continue
		}
		g := generalisation{pattern: pat}
		for _, k := range keys {
			c := ev.commands[k]
			if cp.Match(c.argv) {
				g.keys = append(g.keys, k)
				g.argvs = append(g.argvs, c.argv)
				g.seen += c.n
			}
		}
		if len(g.keys) >= minAgree {
			out = append(out, g)
		}
	}
	return out
}

// generalisable reports whether argv's last word may be generalised: its program does not run
// code it is given, no fixed word is a code flag, and the last word is not an option.
func generalisable(argv []string) bool {
	if slices.Contains(launchers, programName(argv[0])) || strings.HasPrefix(path.Base(argv[0]), "python") {
		return false
	}
	for _, w := range argv[1 : len(argv)-1] {
		if slices.Contains(codeFlags, w) {
			return false
		}
	}
	return !strings.HasPrefix(argv[len(argv)-1], "-")
}

// dirPrefix is the longest common prefix of ss that ends with "/", "" when none.
func dirPrefix(ss []string) string {
	p := ss[0]
	for _, s := range ss[1:] {
		n := 0
		for n < len(p) && n < len(s) && p[n] == s[n] {
			n++
		}
		p = p[:n]
	}
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i+1]
}

func approveText(r grant.ApproveRule) string {
	if r.Command != "" {
		return "a command `" + r.Command + "` matches"
	}
	return "each " + r.Tool + " call"
}
