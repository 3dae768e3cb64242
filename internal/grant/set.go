// Package grant owns what a role may do: the [Set] of built-in tool names, argv
// allow-patterns ([CommandPattern]) and egress hosts a capability declares, a subagent
// inherits as the union of its capabilities' and a dispatch or plan task may only narrow
// ([Set.Narrow]). Everything absent is denied.
//
// It also owns approve rules ([ApproveRule]) and the judgement of what they hold
// ([ApproveRule.Outside], reading argvs with package cmdread), and of shell command lines
// ([CommandLineAllowed], with package shellwords).
//
// grant is a leaf: it imports nothing of agora but the leaves digest, cmdread and
// shellwords, so the host (catalog, dispatch, the plan format, the gateway) and the worker
// inside a sandbox (toolreg, the runtimes, Claude Code's hook) share one definition.
package grant

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Set is a grant: tool names from [BuiltinTools], argv allow-patterns ([ParseCommandPattern]
// syntax) and egress rules ([EgressRule]: a host pattern, an optional port, optional methods
// and path prefixes). Everything absent is denied.
//
// As a narrowing request (a dispatch's or a plan task's grants) a nil list keeps that part of
// the grant it narrows whole, and an empty one grants none of it.
type Set struct {
	Tools    []string     `yaml:"tools" json:"tools"`
	Commands []string     `yaml:"commands" json:"commands"`
	Egress   []EgressRule `yaml:"egress" json:"egress"`
	// Approve marks granted calls a person must approve before they run ([ApproveRule]).
	// Narrowing may add rules, never remove one. Absent (nil) when there are none, so a
	// grant without approvals has the JSON, and the digests, it always had.
	Approve []ApproveRule `yaml:"approve" json:"approve,omitempty"`
}

// Narrow returns child, normalised, when every item of child is covered by s; otherwise it
// returns one [*NarrowError] per uncovered item, joined. A child tool must be named by s; a
// child command pattern must equal a pattern of s (words compared after splitting on
// spaces); a child egress rule must be covered by one rule of s: its host equal or within a
// "*.domain" host (a child "*.a.example.com" is covered by "*.example.com"), the same port
// unless the parent allows any, and no method or path prefix the parent does not allow.
// Narrowing can only remove. Approval rules are the opposite: the result holds the parent's
// and the child's (a child may ask for more approvals, never fewer); an invalid child rule
// is refused.
//
// Normal form: each list sorted, duplicates removed, never nil; command patterns with single
// spaces between words; hosts lowercase.
func (s Set) Narrow(child Set) (Set, error) {
	out := normalize(child)
	parent := normalize(s)
	var errs []error
	for _, t := range out.Tools {
		if !slices.Contains(parent.Tools, t) {
			errs = append(errs, &NarrowError{Kind: "tool", Item: t})
		}
	}
	for _, c := range out.Commands {
		if !slices.Contains(parent.Commands, c) {
			errs = append(errs, &NarrowError{Kind: "command", Item: c})
		}
	}
	for _, r := range out.Egress {
		// A malformed child rule (a ".." path prefix, say) is covered by nothing: callers
		// validate first and say why; this keeps it out whatever they do.
		if r.Validate() != nil || !slices.ContainsFunc(parent.Egress, func(p EgressRule) bool { return p.covers(r) }) {
			errs = append(errs, &NarrowError{Kind: "egress", Item: r.String()})
		}
	}
	for _, r := range child.Approve {
		if r.Validate() != nil {
			errs = append(errs, &NarrowError{Kind: "approve", Item: r.String()})
		}
	}
	out.Approve = NormalApprove(slices.Concat(parent.Approve, out.Approve))
	if len(errs) > 0 {
		return Set{}, errors.Join(errs...)
	}
	return out, nil
}

// Union returns the items of s and o together, s's first, as given: a subagent's grant is
// the union of its capabilities'. [Set.Narrow] normalises it.
func (s Set) Union(o Set) Set {
	return Set{
		Tools:    slices.Concat(s.Tools, o.Tools),
		Commands: slices.Concat(s.Commands, o.Commands),
		Egress:   slices.Concat(s.Egress, o.Egress),
		Approve:  slices.Concat(s.Approve, o.Approve),
	}
}

// NarrowError is returned by [Set.Narrow] for an item of the child grant that the parent
// does not cover.
type NarrowError struct {
	Kind string // "tool", "command", "egress" or "approve"
	Item string
}

func (e *NarrowError) Error() string {
	if e.Kind == "approve" {
		return "narrow grants: approve rule " + strconv.Quote(e.Item) + " is not valid (a tool name or {command: PATTERN})"
	}
	return "narrow grants: " + e.Kind + " " + strconv.Quote(e.Item) + " is not covered by the parent grant"
}

// Clone returns a deep copy of s, so a holder is not changed by its caller's later edits.
func (s Set) Clone() Set {
	egress := make([]EgressRule, len(s.Egress))
	for i, r := range s.Egress {
		r.Methods, r.Paths = slices.Clone(r.Methods), slices.Clone(r.Paths)
		egress[i] = r
	}
	if s.Egress == nil {
		egress = nil
	}
	return Set{Tools: slices.Clone(s.Tools), Commands: slices.Clone(s.Commands), Egress: egress, Approve: slices.Clone(s.Approve)}
}

func normalize(s Set) Set {
	return Set{
		Tools:    sortedSet(s.Tools, func(s string) string { return s }),
		Commands: sortedSet(s.Commands, func(s string) string { return strings.Join(strings.Fields(s), " ") }),
		Egress:   NormalRules(s.Egress),
		Approve:  NormalApprove(s.Approve),
	}
}

func sortedSet(in []string, norm func(string) string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = norm(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
