package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/grant"
)

// SubagentGrants returns what the subagent of doc may do: the union of the grants of the
// capabilities it pins (tools, commands, egress), in [grant.Set] normal form. This is
// the most any dispatch of it can be granted; a dispatch may only narrow it.
func SubagentGrants(ctx context.Context, cat *view.Catalog, doc catalog.SubagentDoc) (grant.Set, error) {
	var all grant.Set
	for _, pin := range doc.Capabilities {
		v, err := cat.Resolve(ctx, catalog.KindCapability, pin.Name+"@"+string(pin.Digest))
		if err != nil {
			return grant.Set{}, err
		}
		if g := v.Meta.CapabilityDoc; g != nil {
			all = all.Union(g.Set)
		}
	}
	// Narrowing a grant by itself only normalises it.
	return all.Narrow(all)
}

// effectiveGrants is what a dispatch of a subagent with catalogGrants may do: the catalog's
// grant, narrowed by the parent dispatch's when req resumes one (a resumed dispatch never
// regains what its parent was not given), then by req.Grants. A nil list in req.Grants keeps
// that kind as it is; an empty one grants none of it. An item not covered is refused, named.
func (d *Dispatcher) effectiveGrants(ctx context.Context, subagent string, catalogGrants grant.Set, req Request) (grant.Set, error) {
	base := catalogGrants
	if req.ParentID != "" {
		parent, err := d.Records.Get(ctx, req.ParentID)
		if err != nil {
			return grant.Set{}, err
		}
		if parent.Grants != nil {
			if base, err = catalogGrants.Narrow(*parent.Grants); err != nil {
				return grant.Set{}, fmt.Errorf("grants of parent dispatch %s: %w", parent.ID, err)
			}
		}
	}
	if req.Grants == nil {
		return base, nil
	}
	child := *req.Grants
	if child.Tools == nil {
		child.Tools = base.Tools
	}
	if child.Commands == nil {
		child.Commands = base.Commands
	}
	if child.Egress == nil {
		child.Egress = base.Egress
	}
	g, err := base.Narrow(child)
	if err != nil {
		return grant.Set{}, fmt.Errorf("a dispatch may only narrow the grant of subagent %q: %w", subagent, err)
	}
	return g, nil
}

// manifestCommands returns the capabilities' own command patterns that the effective grant
// keeps. The worker checks every granted pattern against the archives' capability.yaml
// verbatim, and [grant.Set.Narrow] normalises the spacing of a pattern.
func manifestCommands(declared, effective []string) []string {
	out := []string{}
	for _, c := range declared {
		if slices.Contains(effective, strings.Join(strings.Fields(c), " ")) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// grantsDetails is the audit form of g.
func grantsDetails(g grant.Set) map[string]any {
	egress := make([]any, len(g.Egress))
	for i, r := range g.Egress {
		b, _ := r.MarshalJSON()
		var v any
		json.Unmarshal(b, &v)
		egress[i] = v
	}
	out := map[string]any{"tools": nonNilStrings(g.Tools), "commands": nonNilStrings(g.Commands), "egress": egress}
	if len(g.Approve) > 0 {
		// Only when there are some, so an entry without approvals keeps its bytes.
		approve := make([]any, len(g.Approve))
		for i, r := range g.Approve {
			approve[i] = r.String()
		}
		out["approve"] = approve
	}
	return out
}

// uniqRules is rs in the normal form of a grant: sorted, without duplicates, never nil.
func uniqRules(rs []grant.EgressRule) []grant.EgressRule { return grant.NormalRules(rs) }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
