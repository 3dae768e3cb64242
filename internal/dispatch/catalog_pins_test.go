package dispatch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
)

// retire retires kind/name as a prune would.
func (e *env) retire(kind catalog.Kind, name string) {
	e.t.Helper()
	v, err := e.d.Catalog.Resolve(e.t.Context(), kind, name)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.w.Apply(e.t.Context(), "test", "apply", []provision.Change{{Action: catalog.ActionRetire, Kind: kind, Name: name, Previous: v.Digest}}, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) current(kind catalog.Kind, name string) string {
	e.t.Helper()
	v, err := e.d.Catalog.Resolve(e.t.Context(), kind, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Ref()
}

// TestAttack_PinnedCatalogVersions: a caller held to the current catalog (an MCP client:
// CurrentCatalog) that remembers a subagent's or an env bundle's old digest starts nothing
// from it once people registered a new version (a subagent's capabilities narrowed: assign
// made a new version), nor from any version of a name people retired; nothing is recorded.
// The current version's pin works, and work that inherits its versions (CurrentCatalog
// unset: a person's CLI, a resumed child, a run's task) still gets the old ones.
func TestAttack_PinnedCatalogVersions(t *testing.T) {
	e := newEnv(t)
	if err := e.subagentWith("wide", "true", "shell"); err != nil {
		t.Fatal(err)
	}
	oldSub := e.current(catalog.KindSubagent, "wide")
	if err := e.subagentWith("wide", "true"); err != nil { // people narrow it: no capabilities
		t.Fatal(err)
	}
	curSub := e.current(catalog.KindSubagent, "wide")
	e.envBundle("ci", map[string]string{"A": "1"}, nil)
	oldEnv := e.current(catalog.KindEnv, "ci")
	e.envBundle("ci", map[string]string{"A": "2"}, nil)
	curEnv := e.current(catalog.KindEnv, "ci")
	e.subagent("gone", "true")
	goneSub := e.current(catalog.KindSubagent, "gone")
	e.envBundle("gone-env", map[string]string{"B": "1"}, nil)
	goneEnv := e.current(catalog.KindEnv, "gone-env")
	e.retire(catalog.KindSubagent, "gone")
	e.retire(catalog.KindEnv, "gone-env")

	before, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		req  dispatch.Request
		want string
	}{
		{"superseded subagent", dispatch.Request{Subagent: oldSub}, `subagent "wide": version ` + strings.TrimPrefix(oldSub, "wide@") + " is not its current one"},
		{"retired subagent", dispatch.Request{Subagent: goneSub}, `subagent "gone" not found; known: `},
		{"superseded env bundle", dispatch.Request{Subagent: "wide", Envs: []string{oldEnv}}, `env bundle "ci": version ` + strings.TrimPrefix(oldEnv, "ci@") + " is not its current one"},
		{"retired env bundle", dispatch.Request{Subagent: "wide", Envs: []string{goneEnv}}, `env bundle "gone-env" not found; known: ci`},
	} {
		tt.req.CurrentCatalog, tt.req.Actor = true, "mcp:x"
		_, err := e.d.Accept(t.Context(), tt.req)
		var re *dispatch.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "without a version") {
			t.Errorf("%s: Accept = %v, want a RequestError containing %q and saying to name it without a version", tt.name, err, tt.want)
		}
	}
	after, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused requests left %d records", len(after)-len(before))
	}

	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: curSub, Envs: []string{curEnv}, CurrentCatalog: true, Actor: "mcp:x"})
	if err != nil || r.Subagent+"@"+string(r.SubagentDigest) != curSub {
		t.Errorf("the current versions pinned: %+v, %v", r, err)
	}
	for _, ref := range []string{oldSub, goneSub} {
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: ref, Envs: []string{oldEnv, goneEnv}, Actor: "test"})
		if err != nil || r.Subagent+"@"+string(r.SubagentDigest) != ref {
			t.Errorf("work that inherits %s: %+v, %v", ref, r, err)
		}
	}
}
