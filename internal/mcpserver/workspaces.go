package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/catalog"
)

// workspaceDesc is the static description of agora_dispatch's workspace argument; tools/list
// adds the workspaces that exist when it is asked.
const workspaceDesc = "the workspace to work on: a git repository people registered, by name (NAME or NAME@sha256:HEX); " +
	"omit it for an empty directory"

// maxListedWorkspaces caps how many workspaces the published schema names.
const maxListedWorkspaces = 256

// listWorkspaces rewrites agora_dispatch's input schema in a tools/list result so that its
// workspace argument lists the workspaces registered now: an enum of their names and a
// description naming each with its allowed revisions and description. Metadata only: the
// catalog's Meta never holds a repository path. A failed lookup leaves the static schema.
func (s *Server) listWorkspaces(ctx context.Context, tools []*mcp.Tool) {
	for i, t := range tools {
		if t.Name != "agora_dispatch" {
			continue
		}
		vs, err := s.cfg.Catalog.List(ctx, catalog.KindWorkspace)
		if err != nil {
			s.log.Warn("list workspaces for tools/list", "err", s.scrub(err.Error()))
			return
		}
		raw, ok := t.InputSchema.(json.RawMessage)
		if !ok {
			return
		}
		var schema map[string]any
		if err := json.Unmarshal(raw, &schema); err != nil {
			return
		}
		props, _ := schema["properties"].(map[string]any)
		ws, _ := props["workspace"].(map[string]any)
		if ws == nil {
			return
		}
		ws["description"], ws["enum"] = describeWorkspaces(vs)
		if ws["enum"] == nil {
			delete(ws, "enum")
		}
		b, err := json.Marshal(schema)
		if err != nil {
			return
		}
		c := *t
		c.InputSchema = json.RawMessage(b)
		tools[i] = &c
	}
}

// describeWorkspaces returns the workspace argument's description and enum for vs (nil when
// there is none: an empty enum admits nothing).
func describeWorkspaces(vs []catalog.Version) (string, any) {
	if len(vs) == 0 {
		return workspaceDesc + ". No workspaces are registered: leave it out.", nil
	}
	vs = vs[:min(len(vs), maxListedWorkspaces)]
	var b strings.Builder
	b.WriteString(workspaceDesc + ". Registered workspaces:")
	names := make([]any, 0, len(vs))
	for _, v := range vs {
		names = append(names, v.Name)
		fmt.Fprintf(&b, " %s (revisions %s", v.Name, strings.Join(v.Meta.Revisions, ", "))
		if v.Meta.DefaultRevision != "" {
			fmt.Fprintf(&b, "; default %s", v.Meta.DefaultRevision)
		}
		b.WriteString(")")
		if d := strings.TrimSpace(v.Meta.Description); d != "" {
			fmt.Fprintf(&b, ": %s", cutDesc(d))
		}
		b.WriteString(";")
	}
	// What people registered shows as every answer does: hidden characters escaped
	// (tools/list is not an answer, and would pass a description's U+202E as it is).
	return agenttext.Escape(strings.TrimSuffix(b.String(), ";")) + ".", names
}

func cutDesc(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= 200 {
		return s
	}
	s = s[:200]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
