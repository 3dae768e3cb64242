package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestRedTeam37_ToolsListEscapesCatalogText: agora escapes every tool answer and tool error. tools/list is neither: agora_dispatch's workspace argument is
// described from the catalog (each workspace's revisions and description, as registered), so
// a description holding a right-to-left override, a zero-width space or an ANSI sequence
// reached the lead's tool list as it was. It now shows escaped, as every answer does; the
// workspace's name in the enum (what the lead sends back) is unchanged.
func TestRedTeam37_ToolsListEscapesCatalogText(t *testing.T) {
	f := newFixture()
	f.cat[catalog.KindWorkspace] = []catalog.Version{{Kind: catalog.KindWorkspace, Name: "app",
		Meta: catalog.Meta{Description: hostile, Revisions: []string{"main", "release/*"}, DefaultRevision: "main"}}}
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		noHidden(t, "tools/list "+tool.Name, v)
		if tool.Name != "agora_dispatch" {
			continue
		}
		found = true
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
				Enum        []string
			} `json:"properties"`
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		ws := schema.Properties["workspace"]
		if !strings.Contains(ws.Description, escaped) || len(ws.Enum) != 1 || ws.Enum[0] != "app" {
			t.Errorf("workspace: description %q, enum %v; want the description escaped (%q) and the enum [app]", ws.Description, ws.Enum, escaped)
		}
	}
	if !found {
		t.Fatal("no agora_dispatch in tools/list")
	}
}
