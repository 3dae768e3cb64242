package toolreg

import (
	"errors"
	"slices"
	"strings"
)

// Grants is what a role may do, with the shape of a capability's grants in capability.yaml:
// tool names, argv allow-patterns (catalog.ParseCommandPattern syntax) and egress hosts
// (an exact lowercase host, or "*.example.com" for any subdomain of example.com, not
// example.com itself). Everything absent is denied.
type Grants struct {
	Tools    []string `json:"tools"`
	Commands []string `json:"commands"`
	Egress   []string `json:"egress"`
}

// Narrow returns child, normalised, when every item of child is covered by g; otherwise it
// returns one [*NarrowError] per uncovered item, joined. A child tool must be named by g; a
// child command pattern must equal a pattern of g (words compared after splitting on
// spaces); a child egress host must equal an entry of g or be covered by a "*.domain" entry
// of g (a child "*.a.example.com" is covered by "*.example.com"). Narrowing can only remove.
//
// Normal form: each list sorted, duplicates removed, never nil; command patterns with single
// spaces between words; hosts lowercase.
func (g Grants) Narrow(child Grants) (Grants, error) {
	out := normalize(child)
	parent := normalize(g)
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
	for _, h := range out.Egress {
		if !hostCoveredBy(parent.Egress, h) {
			errs = append(errs, &NarrowError{Kind: "egress", Item: h})
		}
	}
	if len(errs) > 0 {
		return Grants{}, errors.Join(errs...)
	}
	return out, nil
}

// HostGranted reports whether host (as in a URL, without port) is allowed by the egress
// entries: equal to an entry, or a strict subdomain of a "*.domain" entry. Comparison is
// case-insensitive; a host with a trailing dot matches nothing.
func HostGranted(egress []string, host string) bool {
	if host == "" {
		return false
	}
	host = strings.ToLower(host)
	for _, e := range egress {
		if e == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(e, "*"); ok && strings.HasPrefix(suffix, ".") &&
			len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// hostCoveredBy reports whether the child entry h (a host or "*.domain") is within the
// parent entries.
func hostCoveredBy(parent []string, h string) bool {
	if slices.Contains(parent, h) {
		return true
	}
	// "*.a.example.com" is covered when "x.a.example.com" for every x would be, which is
	// exactly when "a.example.com" is a strict subdomain of a parent "*.domain".
	probe := h
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		probe = "x." + rest
	}
	for _, e := range parent {
		if strings.HasPrefix(e, "*.") && HostGranted([]string{e}, probe) {
			return true
		}
	}
	return false
}

func normalize(g Grants) Grants {
	return Grants{
		Tools:    sortedSet(g.Tools, func(s string) string { return s }),
		Commands: sortedSet(g.Commands, func(s string) string { return strings.Join(strings.Fields(s), " ") }),
		Egress:   sortedSet(g.Egress, strings.ToLower),
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

// clone returns a deep copy of g, so a view is not changed by its caller's later edits.
func (g Grants) clone() Grants {
	return Grants{Tools: slices.Clone(g.Tools), Commands: slices.Clone(g.Commands), Egress: slices.Clone(g.Egress)}
}
