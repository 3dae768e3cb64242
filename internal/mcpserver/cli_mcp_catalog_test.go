package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// catalogHostOnly are the members the CLI's catalog lists show and MCP's never do: who
// registered a version and its size, and the stored policy a model is not shown (a
// capability's grants and file count, a subagent's model and budget, an env bundle's secret
// bindings, the scanner's opt-outs). docs/mcp.md ("Answers") names the same list.
var catalogHostOnly = []string{"size", "registered_by", "file_count", "grants", "model", "budget", "bindings", "allowed_credential_patterns"}

// TestSameObject_CatalogCLIAndMCP lists capabilities, subagents and env bundles through
// `agora KIND list -o json` and the agora_*_list tools of the real binary (the
// catalog part): the same wrapper ({capabilities}, {subagents}, {envs}), every member MCP
// shows with the CLI's name and value, a subagent's capabilities as [{name, digest}] on both
// sides, and on the CLI nothing more than the host-only members. `agora workspace list -o json`
// has the same form ({workspaces}), its names those tools/list publishes. Neither side shows a
// prompt, a command, a value or a host path. `KIND show -o json` is the list's item plus what
// the content holds (files, prompt, values, the repository's path). Failed before: the CLI printed the stored versions
// (a bare list, a nested meta), MCP a subagent's capabilities as bare names.
func TestSameObject_CatalogCLIAndMCP(t *testing.T) {
	home := newHome(t)
	repo, _ := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*",
		"--description", "the application")
	cs := stdioSession(t, home)

	for _, c := range []struct{ cmd, tool, key string }{
		{"capability", "agora_capabilities_list", "capabilities"},
		{"subagent", "agora_subagents_list", "subagents"},
		{"env", "agora_envs_list", "envs"},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			raw := agora(t, home, nil, c.cmd, "list", "-o", "json")
			cli := asJSON(t, c.cmd+" list -o json", raw)
			mcpAns := structured(t, call(t, cs, c.tool, nil))
			if keys := objectKeys(cli); !slices.Equal(keys, []string{c.key}) {
				t.Fatalf("%s list -o json: members %v, want [%s] as %s answers\n%s", c.cmd, keys, c.key, c.tool, raw)
			}
			items, _ := field(cli, c.key).([]any)
			if len(items) == 0 {
				t.Fatalf("%s list -o json lists nothing: %s", c.cmd, raw)
			}
			for _, diff := range sameWhereShown(c.key, field(cli, c.key), field(mcpAns, c.key)) {
				t.Error(diff)
			}
			mcpItems, _ := field(mcpAns, c.key).([]any)
			for i, it := range items {
				if i >= len(mcpItems) {
					break
				}
				for k := range it.(map[string]any) {
					if _, ok := mcpItems[i].(map[string]any)[k]; !ok && !slices.Contains(catalogHostOnly, k) {
						t.Errorf("%s[%d].%s: on the CLI, not over MCP, and not a host-only member", c.key, i, k)
					}
				}
			}
			body := string(raw) + string(must(json.Marshal(mcpAns)))
			for _, leak := range []string{"PROMPT-CANARY", "COMMAND-CANARY", "VALUE-CANARY", secretCanary, home, `"meta"`} {
				if strings.Contains(body, leak) {
					t.Errorf("%s: the lists show %q", c.cmd, leak)
				}
			}
		})
	}
	t.Run("show", func(t *testing.T) {
		// `KIND show -o json` is the list's item and what the content holds.
		for _, c := range []struct{ cmd, key, name string }{
			{"capability", "capabilities", "shell"}, {"subagent", "subagents", "writer"}, {"env", "envs", "demo"}, {"workspace", "workspaces", "app"},
		} {
			show := asJSON(t, c.cmd+" show -o json", agora(t, home, nil, c.cmd, "show", c.name, "-o", "json"))
			list, _ := field(asJSON(t, c.cmd+" list -o json", agora(t, home, nil, c.cmd, "list", "-o", "json")), c.key).([]any)
			var item any
			for _, it := range list {
				if field(it, "name") == c.name {
					item = it
				}
			}
			if item == nil {
				t.Fatalf("%s list -o json has no %s", c.cmd, c.name)
			}
			for _, diff := range sameWhereShown(c.cmd+" show", show, item) {
				t.Error(diff)
			}
			for _, k := range []string{"meta", "kind"} {
				if _, ok := show.(map[string]any)[k]; ok {
					t.Errorf("%s show -o json has the stored version's %q", c.cmd, k)
				}
			}
		}
	})
	t.Run("subagent capabilities", func(t *testing.T) {
		for _, ans := range []any{
			asJSON(t, "subagent list -o json", agora(t, home, nil, "subagent", "list", "-o", "json")),
			structured(t, call(t, cs, "agora_subagents_list", nil)),
		} {
			list, _ := field(ans, "subagents").([]any)
			if len(list) == 0 {
				t.Errorf("no subagents listed: %v", ans)
			}
			for _, s := range list {
				caps, _ := field(s, "capabilities").([]any)
				if len(caps) != 1 || field(caps[0], "name") != "shell" || !strings.HasPrefix(fmt.Sprint(field(caps[0], "digest")), "sha256:") {
					t.Errorf("subagent %v: capabilities %v, want [{name: shell, digest: sha256:...}]", field(s, "name"), field(s, "capabilities"))
				}
			}
		}
	})
	t.Run("workspace", func(t *testing.T) {
		raw := agora(t, home, nil, "workspace", "list", "-o", "json")
		cli := asJSON(t, "workspace list -o json", raw)
		if keys := objectKeys(cli); !slices.Equal(keys, []string{"workspaces"}) {
			t.Fatalf("workspace list -o json: members %v, want [workspaces]\n%s", keys, raw)
		}
		ws, _ := field(cli, "workspaces").([]any)
		if len(ws) != 1 {
			t.Fatalf("workspace list -o json: %s", raw)
		}
		want := []string{"default_revision", "description", "digest", "name", "registered_at", "revisions"}
		for _, k := range objectKeys(ws[0]) {
			if !slices.Contains(want, k) && !slices.Contains(catalogHostOnly, k) {
				t.Errorf("workspaces[0].%s: not a member of a workspace", k)
			}
		}
		if field(ws[0], "name") != "app" || field(ws[0], "default_revision") != "" ||
			!slices.Equal(must(json.Marshal(field(ws[0], "revisions"))), []byte(`["main","release/*"]`)) {
			t.Errorf("workspace list -o json: %s", raw)
		}
		if strings.Contains(string(raw), repo) {
			t.Errorf("workspace list -o json shows the repository's path: %s", raw)
		}
	})
}

// objectKeys is v's member names, sorted (nil when v is not an object).
func objectKeys(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
