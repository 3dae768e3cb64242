package suggest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// maxRulePaths is how many paths one proposed rule holds (the grant's own limit); more are
// split over several rules of the same host, port and method.
const maxRulePaths = 64

// proposeRules returns the egress rules the evidence supports, and their items:
//   - a connection whose requests were not read: its host and port, any request;
//   - requests with method and path: per host, port and method, those paths (or their
//     generalised parents), unless the host and port are already granted whole;
//   - the dispatches' restricted rules that admitted connections the proxy read.
func proposeRules(ev *Evidence, current grant.Set, opts Options) ([]grant.EgressRule, []Item) {
	var rules []grant.EgressRule
	var items []Item
	whole := map[hostPort]bool{}
	for _, hp := range sortedHostPorts(ev.conns) {
		whole[hp] = true
		r := grant.EgressRule{Host: hp.host, Port: hp.port}
		rules = append(rules, r)
		items = append(items, Item{Kind: "egress", Grant: r.String(), Text: "connects to " + r.String() + " (any request: the proxy did not read this connection)",
			New: !covered(current, r), Basis: "observed", Seen: ev.conns[hp].n})
	}
	type hpm struct {
		hostPort
		method string
	}
	paths := map[hpm][]string{}
	counts := map[hpm]int{}
	for rq, s := range ev.requests {
		if whole[rq.hostPort] {
			continue
		}
		k := hpm{rq.hostPort, rq.method}
		paths[k] = append(paths[k], rq.path)
		counts[k] += s.n
	}
	keys := slices.SortedFunc(maps.Keys(paths), func(a, b hpm) int {
		return cmp.Or(strings.Compare(a.host, b.host), cmp.Compare(a.port, b.port), strings.Compare(a.method, b.method))
	})
	for _, k := range keys {
		ps, basis := paths[k], "observed"
		slices.Sort(ps)
		if !opts.Narrow {
			var gen bool
			if ps, gen = generalisePaths(ps); gen {
				basis = "generalised"
			}
		}
		for chunk := range slices.Chunk(ps, maxRulePaths) {
			r := grant.EgressRule{Host: k.host, Port: k.port, Methods: []string{k.method}, Paths: slices.Clone(chunk)}
			rules = append(rules, r)
			items = append(items, Item{Kind: "egress", Grant: r.String(), Text: requestText(r), New: !covered(current, r),
				Basis: basis, Seen: counts[k]})
		}
	}
	for _, r := range grant.NormalRules(ev.keptRules) {
		if whole[hostPort{r.Host, r.Port}] {
			continue
		}
		rules = append(rules, r)
		items = append(items, Item{Kind: "egress", Grant: r.String(), Text: requestText(r) + " (kept: the proxy records only the requests it refuses)",
			New: !covered(current, r), Basis: "kept"})
	}
	return grant.NormalRules(rules), items
}

// generalisePaths replaces minAgree or more distinct paths directly under one parent of at
// least one segment by that parent as a prefix ("/repos/acme/"), and drops the paths it
// admits. It reports whether it generalised any.
func generalisePaths(ps []string) ([]string, bool) {
	byParent := map[string]int{}
	for _, p := range ps {
		if i := strings.LastIndexByte(p, '/'); i > 0 && i < len(p)-1 {
			byParent[p[:i+1]]++
		}
	}
	var prefixes []string
	for parent, n := range byParent {
		if n >= minAgree && (grant.EgressRule{Host: "x", Paths: []string{parent}}).Validate() == nil {
			prefixes = append(prefixes, parent)
		}
	}
	if len(prefixes) == 0 {
		return ps, false
	}
	slices.Sort(prefixes)
	out := slices.Clone(prefixes)
	for _, p := range ps {
		if !slices.ContainsFunc(prefixes, func(pre string) bool { return grant.PathUnder(p, pre) }) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// requestText is a restricted rule in plain language: "POSTs to api.github.com:443/repos/x".
func requestText(r grant.EgressRule) string {
	hp := grant.EgressRule{Host: r.Host, Port: r.Port}.String()
	verbs := make([]string, len(r.Methods))
	for i, m := range r.Methods {
		verbs[i] = m + "s"
	}
	verb := cmp.Or(strings.Join(verbs, ", "), "sends any request")
	if len(r.Paths) == 0 {
		return verb + " to " + hp
	}
	// A path rule is a prefix: it admits the path and everything under it (the grant has no
	// exact path), and "/" every path of the host. The line says so: an agent that asked
	// for "/" once must not read as asking for one page.
	ps := make([]string, len(r.Paths))
	under := ""
	for i, p := range r.Paths {
		ps[i] = hp + p
		switch {
		case p == "/":
			ps[i] += "* (every path of the host)"
		case strings.HasSuffix(p, "/"):
			ps[i] += "*"
		default:
			under = " (and what lies under each)"
		}
	}
	return verb + " to " + strings.Join(ps, ", ") + under
}

// covered reports whether the current grant already admits everything r does.
func covered(current grant.Set, r grant.EgressRule) bool {
	_, err := current.Narrow(grant.Set{Tools: []string{}, Commands: []string{}, Egress: []grant.EgressRule{r}})
	return err == nil
}

func sortedHostPorts(m map[hostPort]*seen) []hostPort {
	return slices.SortedFunc(maps.Keys(m), func(a, b hostPort) int { return cmp.Or(strings.Compare(a.host, b.host), cmp.Compare(a.port, b.port)) })
}

// Diff is a proposal against the current grant: the items it adds and those it drops, each
// "kind: item".
type Diff struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

func diff(current, proposed grant.Set) Diff {
	d := Diff{Added: []string{}, Removed: []string{}}
	side := func(kind string, a, b []string) {
		for _, x := range a {
			if !slices.Contains(b, x) {
				d.Added = append(d.Added, kind+": "+x)
			}
		}
		for _, x := range b {
			if !slices.Contains(a, x) {
				d.Removed = append(d.Removed, kind+": "+x)
			}
		}
	}
	side("tools", proposed.Tools, current.Tools)
	side("commands", quoteEach(proposed.Commands), quoteEach(current.Commands))
	side("egress", ruleStrings(proposed.Egress), ruleStrings(current.Egress))
	approves := func(rs []grant.ApproveRule) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.String()
		}
		return out
	}
	side("approve", approves(proposed.Approve), approves(current.Approve))
	return d
}

func quoteEach(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func ruleStrings(rs []grant.EgressRule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// String is the proposal's summary line.
func (p *Proposal) String() string {
	return fmt.Sprintf("%d tools, %d command patterns, %d egress rules from %d dispatches (%d entries)",
		len(p.Grant.Tools), len(p.Grant.Commands), len(p.Grant.Egress), p.Dispatches, p.Entries)
}
