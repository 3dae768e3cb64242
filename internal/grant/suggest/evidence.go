package suggest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/shellwords"
)

// Limits on evidence, so 100,000 hostile entries cost memory in proportion to what is
// distinct, and a proposal stays small enough for a person to review.
const (
	// maxDistinct caps the distinct commands, connections and requests kept; past it the
	// evidence is refused whole ([ErrTooMuch]): a grant that large cannot be reviewed.
	maxDistinct = 4096
	// maxRefusals caps the refusals listed; the rest are counted.
	maxRefusals = 100
	// maxWords and maxWordLen bound an argv that can become a pattern.
	maxWords   = 64
	maxWordLen = 256
	// maxRecordedPath is the longest path the egress proxy records; a path of this length
	// may have been cut, so it is never proposed.
	maxRecordedPath = 200
)

// Evidence is what a set of dispatches did, deduplicated, built by [Evidence.Dispatch] and
// [DispatchEvidence.Entry].
type Evidence struct {
	tools    map[string]*seen
	commands map[string]*commandSeen // key: argv joined by NUL
	conns    map[hostPort]*seen      // allowed connections whose requests were not read
	requests map[request]*seen       // would-deny requests (learn_hosts admitted them): method and path known
	// kept are rules and command patterns of the dispatches' own grants that admitted
	// allowed calls whose detail the audit does not hold.
	keptRules    []grant.EgressRule
	keptCommands map[string]bool
	refused      []Refusal
	refusedMore  int
	refusedAt    map[string]int // kind, item and reason of a listed refusal -> its index
	// proxyRefused is what the agent tried and the egress proxy refused: never proposed.
	proxyRefused     []Refusal
	proxyRefusedMore int
	proxyRefusedAt   map[string]int
	notes            []string
	dispatches       int
	entries          int
	tooMuch          bool
}

type seen struct {
	n, dispatches int
	last          int // the dispatch number that saw it last
}

func (s *seen) add(d int) {
	s.n++
	if s.last != d {
		s.dispatches++
		s.last = d
	}
}

type commandSeen struct {
	seen
	argv []string
}

type hostPort struct {
	host string
	port uint16
}

type request struct {
	hostPort
	method, path string
}

// Refusal is a piece of evidence not proposed, and why. Item is quoted ASCII.
type Refusal struct {
	Kind   string `json:"kind"`
	Item   string `json:"item"`
	Reason string `json:"reason"`
	// Dispatch is the first dispatch it was seen in; Count how often it was seen in all.
	Dispatch string `json:"dispatch"`
	Count    int    `json:"count"`
}

// NewEvidence returns empty evidence.
func NewEvidence() *Evidence {
	return &Evidence{tools: map[string]*seen{}, commands: map[string]*commandSeen{}, conns: map[hostPort]*seen{},
		requests: map[request]*seen{}, keptCommands: map[string]bool{}, refusedAt: map[string]int{}, proxyRefusedAt: map[string]int{}}
}

// DispatchEvidence adds the entries of one dispatch to its [Evidence].
type DispatchEvidence struct {
	// Learn is set for a learn dispatch (docs/learn.md): a call its grant refused was
	// recorded as would_deny and then ran, so its tool.call says allowed.
	Learn bool

	ev     *Evidence
	id     string
	n      int
	grants grant.Set
	// learnHosts are the hosts and ports of this dispatch's net.would_deny connections: the
	// proxy let them through because egress.learn_hosts admitted them.
	learnHosts map[hostPort]bool
}

// Dispatch starts the evidence of dispatch id, whose recorded grant was grants (what admitted
// its allowed calls). command is the argv an exec subagent runs, nil for other runtimes.
func (ev *Evidence) Dispatch(id string, grants grant.Set, command []string) *DispatchEvidence {
	ev.dispatches++
	d := &DispatchEvidence{ev: ev, id: id, n: ev.dispatches, grants: grants, learnHosts: map[hostPort]bool{}}
	if command != nil {
		d.command(command, "the subagent's command")
	}
	return d
}

// Entry adds one audit entry of the dispatch. Kinds that say nothing about what the dispatch
// did are ignored.
func (d *DispatchEvidence) Entry(kind string, details map[string]any) {
	d.ev.entries++
	switch kind {
	case entry.ToolCall:
		t := entry.ReadToolDecision(details)
		if t.Decision == "allowed" {
			// The worker allows only what the grant holds: a report that it allowed
			// anything else is not the worker's, and not evidence. In a learn dispatch it
			// follows the call's would_deny, which is.
			if name, ok := agoraTool(t.Tool); ok && name != "" && !slices.Contains(d.grants.Tools, name) {
				if d.Learn {
					return
				}
				d.refuse("tool", t.Tool, "reported as allowed, but the dispatch's grant did not hold it: not a report the worker makes, so not evidence")
				return
			}
		}
		if t.Decision != "allowed" {
			// A refused or requested call of a tool the grant lacks proposes nothing, in
			// every dispatch: the agent tried it, it did not run, and a tool.call does not
			// say who reported it (anything in the sandbox can post one to the gateway). A
			// learn dispatch records what its grant refuses as a would_deny, which does;
			// that proposes the tool. A plain dispatch's refusals are listed, never
			// proposed: what the work needs beyond its grant is learned with --learn.
			if name, ok := agoraTool(t.Tool); ok && name != "" && !slices.Contains(d.grants.Tools, name) {
				if t.Decision == "denied" {
					why := "refused in a learn dispatch without a would_deny: a refusal learn kept (a path outside the workspace) or one a process in the sandbox reported, so not evidence"
					if !d.Learn {
						why = "the agent tried it and the grant refused it: a refusal is not a use, and any process in the sandbox can report one, so it is never proposed; run the dispatch with --learn to record what the work needs beyond its grant"
					}
					d.refuse("tool", t.Tool, why)
				}
				return
			}
		}
		tool, ok := d.tool(t.Tool)
		if !ok || tool != "run_command" {
			return
		}
		if t.Decision == "denied" {
			d.ev.note("run_command calls were refused; the audit keeps only a hash of their arguments, so their commands cannot be proposed: run the dispatch with --learn to record them")
			return
		}
		// Allowed (or about to run): one of the dispatch's patterns admitted it.
		for _, c := range d.grants.Commands {
			d.ev.keptCommands[strings.Join(strings.Fields(c), " ")] = true
		}
		if len(d.grants.Commands) > 0 {
			d.ev.note("run_command calls ran under the dispatch's grant; the audit keeps only a hash of their arguments, so the patterns that admitted them are kept as they are")
		}
	case entry.ToolWouldDeny:
		w, _ := entry.ReadWouldDeny(kind, details)
		// exec's command is its subagent's argv, taken from the subagent's document
		// ([Evidence.Dispatch]), and needs no tool.
		if w.Tool == execTool {
			return
		}
		if !d.Learn {
			// Only a learn dispatch records what its grant would refuse; one in any other
			// dispatch is no report of agora's.
			d.refuse("tool", w.Tool+" "+w.Command, "a would_deny in a dispatch that was not a learn dispatch: agora records none there, so not evidence")
			return
		}
		switch w.Reporter {
		case reporterSandbox:
			// Not proven to be the worker's: the agent could have sent it.
			d.refuse("tool", w.Tool+" "+w.Command, "reported by a process in the sandbox that did not prove to be agora's worker: the agent could have forged it, so it is not evidence")
			return
		case reporterHook:
			d.ev.note(hookNote)
		}
		d.tool(w.Tool)
		// A command is judged by the grant's patterns whatever tool ran it (codex's shell
		// runs under its own name): an unknown tool is refused, its command still read.
		if entry.Has(details, entry.KeyCommand) {
			d.wouldDenyCommand(details[entry.KeyCommand], w.Truncated)
		}
	case entry.NetConnect, entry.NetRequest, entry.NetWouldDeny:
		d.net(kind, details)
	case entry.FileWouldDeny:
		// A grant holds no file paths: a write outside the workspace is only listed, for a
		// person to read (what the work needs that the workspace does not give it).
		w, _ := entry.ReadWouldDeny(kind, details)
		item := w.Path + " (" + w.Op + ")"
		if w.Tool != "" {
			item += " by " + w.Tool
		}
		if w.Reporter == reporterSandbox {
			d.refuse("file", item, "reported by a process in the sandbox that did not prove to be agora's worker: the agent could have forged it")
			return
		}
		d.refuse("file", item, "a write outside the workspace (learn made it in a scratch directory); a grant holds no file paths, so no grant allows it")
	case entry.ToolGatewayBudget:
		d.ev.note("a dispatch spent its audit budget: the evidence after that point is missing")
	}
}

// tool records a tool by agora's name (or Claude Code's) and returns that name; "" with ok
// for a tool that needs no grant.
func (d *DispatchEvidence) tool(name string) (string, bool) {
	d.ev.note(reportedNote)
	mapped, ok := agoraTool(name)
	if !ok {
		d.refuse("tool", name, "not a tool agora can grant; known tools: "+strings.Join(grant.BuiltinTools, ", "))
		return "", false
	}
	if mapped != "" {
		d.ev.add(d.ev.tools, mapped, d.n)
	}
	return mapped, true
}

// Reporters of a tool.would_deny (entry.KeyReporter, set by the gateway): the worker's own
// report (proven by its key), claude's hook relayed by the worker, or anything in the sandbox.
// An entry without one is the host's own or older than the key.
const (
	reporterHook    = "hook"
	reporterSandbox = "sandbox"
)

// hookNote says how far claude's hook reports can be trusted.
const hookNote = "claude-code's calls are as agora's hook inside claude reported them, relayed by the worker, which stops the run when a report does not tell the call claude printed"

// reportedNote says where tool evidence comes from, and how far it can be trusted.
const reportedNote = "tools and commands are as the sandbox's worker reported them through the gateway (a learn dispatch's would_deny only when the worker proved it sent it; other reports an agent reaching the gateway could have made); hosts and requests are what agora's egress proxy saw on the host"

// agoraTool is name as a grant spells it: a built-in tool, or Claude Code's name for one
// (claudert.AgoraTool); "" (ok) for one that needs no grant (Claude Code's TodoWrite).
func agoraTool(name string) (string, bool) {
	if mapped, ok := claudert.AgoraTool(name); ok {
		return mapped, true
	}
	return name, grant.IsBuiltinTool(name)
}

// execTool is the tool a learn entry names for an exec subagent's own command.
const execTool = "exec"

// wouldDenyCommand records a learn entry's command line, read as a POSIX shell reads one
// simple command ([shellwords.Split]); a line that is more (a pipe, a substitution) or was cut
// on record is refused.
func (d *DispatchEvidence) wouldDenyCommand(v any, truncated bool) {
	line, ok := v.(string)
	switch {
	case !ok:
		d.refuse("command", fmt.Sprint(v), "the command on record is not a command line")
		return
	case truncated || len(line) >= entry.MaxWouldDenyCommand-3:
		// A line at the cap may have been cut (the worker cuts without saying so), and a cut
		// line is another command: "rm -rf /tmp/x..." cut after "/".
		d.refuse("command", line, "the command may have been cut on record; run it again with a shorter command line")
		return
	}
	argv, err := shellwords.Split(line)
	if err != nil {
		d.refuse("command", line, "not one simple command of literal words ("+err.Error()+"); only a shell pattern could allow it, and suggest never proposes one")
		return
	}
	d.command(argv, "")
}

// command records an argv that can become a pattern, or refuses it.
func (d *DispatchEvidence) command(argv []string, what string) {
	shown := strings.Join(argv, " ")
	if what != "" {
		shown = what + ": " + shown
	}
	if why := argvProblem(argv); why != "" {
		d.refuse("command", shown, why)
		return
	}
	key := strings.Join(argv, "\x00")
	c, ok := d.ev.commands[key]
	if !ok {
		if d.ev.full(len(d.ev.commands)) {
			return
		}
		c = &commandSeen{argv: slices.Clone(argv)}
		d.ev.commands[key] = c
	}
	c.add(d.n)
}

// argvProblem says why argv cannot be written as a literal pattern, or "".
func argvProblem(argv []string) string {
	if len(argv) == 0 {
		return "an empty command"
	}
	if len(argv) > maxWords {
		return fmt.Sprintf("more than %d words", maxWords)
	}
	for _, w := range argv {
		switch {
		case w == "":
			return "an empty word cannot be written in a pattern"
		case len(w) > maxWordLen:
			return fmt.Sprintf("a word longer than %d bytes", maxWordLen)
		}
		for i := 0; i < len(w); i++ {
			if w[i] <= ' ' || w[i] >= 0x7f {
				return "a word holds white space, a control character or a non-ASCII byte; a pattern cannot hold it"
			}
		}
	}
	return ""
}

// net records an egress entry. Only what the egress proxy let through can be proposed: a
// connection the dispatch's grant admitted, or, in a learn dispatch, one egress.learn_hosts
// admitted (its net.would_deny) and each request on it (a net.would_deny with method and
// path). What the proxy refused (net.connect "deny", net.request) is listed apart, as the
// agent tried it, and never proposed: a grant proposed from it would be the route the proxy
// closed.
func (d *DispatchEvidence) net(kind string, details map[string]any) {
	if entry.Has(details, "budget_spent") {
		d.ev.note("a dispatch spent its network audit budget: the connections after that point are missing")
		return
	}
	n := entry.ReadNet(details)
	switch {
	case kind == entry.NetRequest || (kind == entry.NetConnect && n.Decision == "deny"):
		d.proxyRefused(n)
		return
	case kind == entry.NetWouldDeny && !d.Learn:
		d.refuse("egress", netItem(n), "a would-deny entry of a dispatch not in learn mode: not a record agora makes, so not evidence")
		return
	case kind == entry.NetConnect && n.Decision != "allow" && n.Decision != "error":
		d.refuse("egress", netItem(n), "not a decision the proxy records ("+n.Decision+"), so not evidence")
		return
	}
	hp, why := readHostPort(n.Host, n.Port)
	if why != "" {
		d.refuse("egress", n.Host+":"+n.Port, why)
		return
	}
	if n.Method == "" && n.Path == "" {
		d.connection(kind, n, hp, entry.Has(details, "terminated"))
		return
	}
	if kind != entry.NetWouldDeny {
		d.refuse("egress", netItem(n), "a connection entry with a method or path: not a record the proxy makes, so not evidence")
		return
	}
	r := request{hostPort: hp, method: n.Method, path: n.Path}
	if why := requestProblem(r); why != "" {
		d.refuse("egress", netItem(n), why)
		return
	}
	s, ok := d.ev.requests[r]
	if !ok {
		if d.ev.full(len(d.ev.requests)) {
			return
		}
		s = &seen{}
		d.ev.requests[r] = s
	}
	s.add(d.n)
}

// netItem is an egress entry as a refusal shows it: "host:port", or "METHOD host:port/path".
func netItem(n entry.Net) string {
	hp := n.Host + ":" + n.Port
	if n.Method == "" && n.Path == "" {
		return hp
	}
	return n.Method + " " + hp + n.Path
}

// proxyRefused lists a connection or request the egress proxy refused, once (the same again
// is counted on the first). It is never proposed, in a learn dispatch or any other.
func (d *DispatchEvidence) proxyRefused(n entry.Net) {
	reason := "the egress proxy refused it"
	if n.Reason != "" {
		reason += ": " + cutReason(n.Reason)
	}
	if d.Learn {
		reason += " (a learn dispatch reaches beyond its grant only what egress.learn_hosts admits)"
	} else {
		d.ev.note(refusedNote)
	}
	r := Refusal{Kind: "egress", Item: Show(netItem(n)), Reason: ascii(reason), Dispatch: Show(d.id), Count: 1}
	key := r.Item + "\x00" + r.Reason
	if i, ok := d.ev.proxyRefusedAt[key]; ok {
		d.ev.proxyRefused[i].Count++
		return
	}
	if len(d.ev.proxyRefused) >= maxRefusals {
		d.ev.proxyRefusedMore++
		return
	}
	d.ev.proxyRefusedAt[key] = len(d.ev.proxyRefused)
	d.ev.proxyRefused = append(d.ev.proxyRefused, r)
}

// refusedNote says what to do when the work needs what the proxy refused.
const refusedNote = "the egress proxy refused connections or requests (listed apart: the agent tried them, the proxy refused them); suggest proposes only what the proxy let through: to learn what the work needs beyond its grant, name its hosts in agora.yaml's egress.learn_hosts and run it with --learn"

// cutReason is a proxy's reason cut to maxReason bytes.
func cutReason(s string) string {
	const maxReason = 200
	if len(s) > maxReason {
		return s[:maxReason] + "..."
	}
	return s
}

// connection records an entry about a connection (no method or path) the proxy let through
// (net.connect "allow", or "error": admitted, then the dial failed):
//   - a learn dispatch's net.would_deny of a connection says egress.learn_hosts admitted its
//     host and port; the net.connect that follows says whether its requests were read (each
//     then a net.would_deny);
//   - a connection neither the dispatch's grant nor a net.would_deny of the dispatch admits is
//     not one the proxy lets through, so not evidence;
//   - an admitted connection whose requests the proxy did not read (a CONNECT it did not
//     terminate) is evidence of its host and port, any request;
//   - an allowed connection whose requests the proxy read (plain HTTP, or terminated) keeps
//     the dispatch's rules that admitted it ([DispatchEvidence.keepRules]); when none of the
//     grant's rules matched (a learn host), each request is its own net.would_deny.
func (d *DispatchEvidence) connection(kind string, n entry.Net, hp hostPort, terminated bool) {
	if kind == entry.NetWouldDeny {
		d.learnHosts[hp] = true
		return
	}
	granted := slices.ContainsFunc(d.grants.Egress, func(r grant.EgressRule) bool { return r.MatchesHost(hp.host, hp.port) })
	switch {
	case !granted && !d.learnHosts[hp] && n.Decision == "error":
		// A learn host's dial fails before its would_deny is recorded.
		d.refuse("egress", netItem(n), "the connection failed before anything admitted it on record, so the work never reached it; run the dispatch again once the host answers")
	case !granted && !d.learnHosts[hp]:
		d.refuse("egress", netItem(n), "recorded as allowed, but neither the dispatch's grant nor egress.learn_hosts (a net.would_deny) admitted it: not a record the proxy makes, so not evidence")
	case n.Via != "http" && !terminated:
		d.ev.addConn(hp, d.n)
	case !granted:
		// A learn host the proxy read: each request is its own net.would_deny.
	default:
		if d.keepRules(hp) == keptWhole {
			d.ev.addConn(hp, d.n)
		}
	}
}

type kept int

const (
	keptNone  kept = iota // no rule of the grant matches: learn let it through
	keptRules             // every matching rule restricts requests: they are kept
	keptWhole             // a matching rule admits any request
)

// keepRules keeps, for an allowed connection to hp whose requests the proxy read, the
// dispatch's rules that admitted it: when every rule matching hp restricts methods or paths,
// every request not refused (a refusal is its own net.request) fits one of them. They are
// kept narrowed to hp.
func (d *DispatchEvidence) keepRules(hp hostPort) kept {
	var keep []grant.EgressRule
	for _, r := range d.grants.Egress {
		if !r.MatchesHost(hp.host, hp.port) {
			continue
		}
		if !r.Restricted() {
			return keptWhole
		}
		r.Host, r.Port = hp.host, hp.port
		keep = append(keep, r)
	}
	if len(keep) == 0 {
		return keptNone
	}
	d.ev.keptRules = append(d.ev.keptRules, keep...)
	if len(d.ev.keptRules) > maxDistinct {
		d.ev.keptRules = grant.NormalRules(d.ev.keptRules)
		if len(d.ev.keptRules) > maxDistinct {
			d.ev.tooMuch = true
		}
	}
	return keptRules
}

// readHostPort checks a recorded host and port: a lowercase name or canonical IP literal a
// rule can name exactly (never a "*." pattern), and a port from 1 to 65535.
func readHostPort(host, port string) (hostPort, string) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || port != strconv.FormatUint(p, 10) {
		return hostPort{}, "no port from 1 to 65535 on record"
	}
	if strings.Contains(host, "*") {
		return hostPort{}, "a host pattern, not a host: suggest proposes only hosts reached"
	}
	// Names compare case-insensitively (DNS, and the proxy's own match); nothing else is
	// rewritten.
	host = strings.ToLower(host)
	if err := (grant.EgressRule{Host: host}).Validate(); err != nil {
		return hostPort{}, "not a host a grant can name: " + err.Error()
	}
	return hostPort{host: host, port: uint16(p)}, ""
}

// requestProblem says why a request cannot become a rule's method and path, or "".
func requestProblem(r request) string {
	if len(r.path) >= maxRecordedPath {
		return fmt.Sprintf("the path may have been cut on record (%d bytes or more)", maxRecordedPath)
	}
	rule := grant.EgressRule{Host: r.host, Methods: []string{r.method}, Paths: []string{r.path}}
	if err := rule.Validate(); err != nil {
		return err.Error()
	}
	return ""
}

func (ev *Evidence) addConn(hp hostPort, d int) {
	s, ok := ev.conns[hp]
	if !ok {
		if ev.full(len(ev.conns)) {
			return
		}
		s = &seen{}
		ev.conns[hp] = s
	}
	s.add(d)
}

func (ev *Evidence) add(m map[string]*seen, k string, d int) {
	s, ok := m[k]
	if !ok {
		s = &seen{}
		m[k] = s
	}
	s.add(d)
}

// full reports whether a map of n distinct items may take no more, marking the evidence too
// much to propose from.
func (ev *Evidence) full(n int) bool {
	if n >= maxDistinct {
		ev.tooMuch = true
		return true
	}
	return false
}

func (ev *Evidence) note(s string) {
	if !slices.Contains(ev.notes, s) {
		ev.notes = append(ev.notes, s)
	}
}

// refuse lists a piece of evidence not proposed, once: the same one again (in this dispatch
// or another) is counted on the first.
func (d *DispatchEvidence) refuse(kind, item, reason string) {
	r := Refusal{Kind: kind, Item: Show(item), Reason: ascii(reason), Dispatch: Show(d.id), Count: 1}
	if i, ok := d.ev.refusedAt[r.Kind+"\x00"+r.Item+"\x00"+r.Reason]; ok {
		d.ev.refused[i].Count++
		return
	}
	if len(d.ev.refused) >= maxRefusals {
		d.ev.refusedMore++
		return
	}
	d.ev.refusedAt[r.Kind+"\x00"+r.Item+"\x00"+r.Reason] = len(d.ev.refused)
	d.ev.refused = append(d.ev.refused, r)
}

// Show returns s as people may read it in a terminal or a review: ASCII, quoted with Go
// escapes when it holds anything else (a newline, an ANSI escape, a non-ASCII byte), cut
// after 120 bytes.
func Show(s string) string {
	cut := ""
	if len(s) > 120 {
		s, cut = s[:120], "..."
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\' {
			return strconv.QuoteToASCII(s) + cut
		}
	}
	return s + cut
}

// ascii replaces each byte of s that is not printable ASCII with '?': a reason may quote what
// the evidence held (Go's %q keeps printable non-ASCII letters, which can mimic others).
func ascii(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}
