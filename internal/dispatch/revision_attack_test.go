package dispatch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestAttack_RevisionPinnedWorkspaceVersion: after people narrow a workspace, its old version
// (NAME@sha256:OLD, which every record of a dispatch on it shows) starts no new work for a
// caller held to the current one (an MCP client: CurrentCatalog) or for a plan
// (PinWorkspace), whatever the revision; work that inherits its version (a resumed child, a
// run's task: CurrentCatalog unset) still gets it. A describe-like name the patterns allow
// (release/x-gHEX) reaches no commit through either.
func TestAttack_RevisionPinnedWorkspaceVersion(t *testing.T) {
	e := newEnv(t)
	r := newWSRepo(t)
	e.subagent("cat", `cat VERSION`)
	e.workspace("app", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"main", "release/*", "feature/*"}})
	old, _, err := e.d.PinWorkspace(t.Context(), "app", "feature/x")
	if err != nil {
		t.Fatal(err)
	}
	e.workspace("app", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"main", "release/*"}})
	cur, _, err := e.d.PinWorkspace(t.Context(), "app", "main")
	if err != nil || cur == old {
		t.Fatalf("the current version: %s, %v (old %s)", cur, err, old)
	}

	for _, rev := range []string{"feature/x", r.feature, "main", ""} {
		if _, _, err := e.d.PinWorkspace(t.Context(), old, rev); err == nil || !strings.Contains(err.Error(), "is not its current one") {
			t.Errorf("PinWorkspace(%s, %q) = %v, want the superseded version refused", old, rev, err)
		}
		_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "cat", Workspace: old, Revision: rev, CurrentCatalog: true, Actor: "mcp:x"})
		var re *dispatch.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "is not its current one") || strings.Contains(err.Error(), r.dir) {
			t.Errorf("Accept(%s, %q, current) = %v, want a RequestError refusing the version, naming no path", old, rev, err)
		}
	}
	if _, _, err := e.d.PinWorkspace(t.Context(), cur, "main"); err != nil {
		t.Errorf("the current version pinned by digest: %v", err)
	}
	inherited, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "cat", Workspace: old, Revision: r.feature, Actor: "test"})
	if err != nil || inherited.Workspace != old || inherited.Revision != r.feature {
		t.Errorf("work that inherits the old version: %+v, %v", inherited, err)
	}

	for _, rev := range []string{"release/x-g" + r.feature[:10], "release/1-g" + r.gone} {
		if _, c, err := e.d.PinWorkspace(t.Context(), "app", rev); err == nil {
			t.Errorf("PinWorkspace(app, %q) = %s, want it refused", rev, c)
		}
		if got, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "cat", Workspace: "app", Revision: rev, CurrentCatalog: true, Actor: "mcp:x"}); err == nil {
			t.Errorf("Accept(app, %q) started on %s, want it refused", rev, got.Revision)
		}
	}
}
