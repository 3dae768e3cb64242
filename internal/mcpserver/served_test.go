package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestHTTP_ToolsListPublishesWholeSchemas: over HTTP, with the SDK client's newest protocol
// (the one whose calls the SDK checks against the called tool's schema), tools/list gives
// every tool its whole published input schema although the SDK server holds a bare one, a
// describe succeeds, and arguments the published schema refuses are still refused and
// audited as invalid: agora checks arguments itself, never through the schema the SDK holds.
func TestHTTP_ToolsListPublishesWholeSchemas(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "finished"), nil }
	tok := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: []mcpserver.Client{{Name: "orch", Token: tok, Ceiling: mcpserver.CeilingOrchestrate}}})
	cs := httpSessionVia(t, "http://"+addr+"/mcp", tok, http.DefaultTransport, nil)

	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	published := mcpserver.PublishedSchemasForTest()
	if len(res.Tools) != len(published) {
		t.Fatalf("tools/list gave %d tools, want %d", len(res.Tools), len(published))
	}
	for _, tl := range res.Tools {
		got, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(published[tl.Name], &w); err != nil {
			t.Fatal(err)
		}
		if tl.Name == "agora_dispatch" {
			continue // its workspace argument lists the registered workspaces (TestWorkspace_*)
		}
		if !cmp.Equal(g, w) {
			t.Errorf("%s listed with input schema %s, want %s", tl.Name, got, published[tl.Name])
		}
	}

	var out struct{ Dispatch struct{ ID, State string } }
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID}), &out)
	if out.Dispatch.ID != dispatchID || out.Dispatch.State != "finished" {
		t.Fatalf("describe = %+v", out)
	}
	for _, args := range []map[string]any{{"id": dispatchID, "wait_seconds": -1}, {"id": dispatchID, "extra": 1}, {}} {
		res := call(t, cs, "agora_dispatch_describe", args)
		if !res.IsError {
			t.Errorf("describe %v was not refused: %s", args, text(res))
		}
	}
	var decisions []string
	for _, e := range f.audit.all() {
		decisions = append(decisions, e.Details["decision"].(string))
	}
	if want := []string{"allowed", "invalid", "invalid", "invalid"}; !slices.Equal(decisions, want) {
		t.Errorf("audited decisions %v, want %v", decisions, want)
	}
}
