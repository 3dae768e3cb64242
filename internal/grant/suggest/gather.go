package suggest

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/execrt/execdef"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/store"
)

// maxDispatches caps the dispatches one suggestion reads.
const maxDispatches = 10_000

// Source is what dispatches did, read from agora.db: their records, their audit entries and
// the catalog their subagent is in. Nothing is written.
type Source struct {
	DB      *store.DB
	Catalog *view.Catalog
}

// Gathered is the evidence of some dispatches of one subagent and that subagent's grant now.
type Gathered struct {
	Evidence *Evidence
	Subagent string
	Current  grant.Set
	// Unended names the dispatches not ended yet: their evidence may be partial.
	Unended []string
}

// Gather reads the dispatches ids (each at most once), which must all be of one subagent.
func (s Source) Gather(ctx context.Context, ids []string) (*Gathered, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("no dispatches to suggest from")
	}
	if len(ids) > maxDispatches {
		return nil, fmt.Errorf("%d dispatches; at most %d at once", len(ids), maxDispatches)
	}
	recs := dispatch.NewRecords(s.DB, nil, nil)
	g := &Gathered{Evidence: NewEvidence()}
	commands := map[string][]string{} // subagent digest -> an exec subagent's command (nil otherwise)
	seenID := map[string]bool{}
	for _, id := range ids {
		if seenID[id] {
			continue
		}
		seenID[id] = true
		r, err := recs.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if g.Subagent == "" {
			g.Subagent = r.Subagent
			if g.Current, err = s.current(ctx, r.Subagent); err != nil {
				return nil, err
			}
		} else if r.Subagent != g.Subagent {
			return nil, fmt.Errorf("dispatch %s is of subagent %q, not %q: suggest proposes for one subagent at a time", r.ID, r.Subagent, g.Subagent)
		}
		if !lifecycle.DispatchEnded(r.State) {
			g.Unended = append(g.Unended, r.ID)
		}
		cmd, ok := commands[string(r.SubagentDigest)]
		if !ok {
			if cmd, err = s.execCommand(ctx, r.Subagent+"@"+string(r.SubagentDigest)); err != nil {
				return nil, err
			}
			commands[string(r.SubagentDigest)] = cmd
		}
		// A record from before grants were recorded ran with the subagent's whole grant.
		grants := g.Current
		if r.Grants != nil {
			grants = *r.Grants
		}
		d := g.Evidence.Dispatch(r.ID, grants, cmd)
		d.Learn = r.Learn
		ents, err := audit.List(ctx, s.DB.SQL(), audit.ListOptions{Subject: entry.Dispatch(r.ID)})
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			d.Entry(e.Kind, e.Details)
		}
	}
	slices.Sort(g.Unended)
	return g, nil
}

// current is the grant of subagent name's latest version.
func (s Source) current(ctx context.Context, name string) (grant.Set, error) {
	v, err := s.Catalog.Resolve(ctx, catalog.KindSubagent, name)
	if err != nil {
		return grant.Set{}, fmt.Errorf("the current version of subagent %q: %w", name, err)
	}
	doc, err := s.doc(v)
	if err != nil {
		return grant.Set{}, err
	}
	return dispatch.SubagentGrants(ctx, s.Catalog, doc)
}

// execCommand returns the command of subagent ref when it runs on the exec runtime: the
// agent's command is a granted command there.
func (s Source) execCommand(ctx context.Context, ref string) ([]string, error) {
	v, err := s.Catalog.Resolve(ctx, catalog.KindSubagent, ref)
	if err != nil {
		return nil, err
	}
	doc, err := s.doc(v)
	if err != nil {
		return nil, err
	}
	rt := cmp.Or(doc.Runtime, runtimes.Default)
	if rt != execdef.Name || len(doc.Command) == 0 {
		return nil, nil
	}
	return doc.Command, nil
}

func (s Source) doc(v catalog.Version) (catalog.SubagentDoc, error) {
	data, err := s.Catalog.Content(v)
	if err != nil {
		return catalog.SubagentDoc{}, err
	}
	return catalog.ParseSubagentDoc(data)
}
