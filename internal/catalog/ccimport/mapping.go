package ccimport

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// CapabilitySuffix ends the name of the capability an imported subagent pins: subagent
// code-reviewer holds code-reviewer.claude-tools.
const CapabilitySuffix = ".claude-tools"

// maxNameLen is the longest subagent name whose capability name still fits the catalog's 64.
const maxNameLen = 64 - len(CapabilitySuffix)

// Imported is one subagent file mapped to what agora registers for it.
type Imported struct {
	Agent *Agent `json:"-"`
	// Capability is the name of the capability that holds the subagent's grant.
	Capability string `json:"capability"`
	// Grant is the union of the tools' grants, normalised.
	Grant grant.Set `json:"grant"`
	// Tools is each entry's mapping, in the file's order.
	Tools []ToolMap `json:"tools"`
	// DefaultTools is true when the file has no tools and --default-tools supplied them.
	DefaultTools bool `json:"default_tools"`
	// Model is the subagent's model in agora ("" is claude's default); ModelNote says how it
	// follows from the file's.
	Model     string `json:"model"`
	ModelNote string `json:"model_note,omitempty"`
}

// ToolMap is one entry's mapping and its line (0 when it came from --default-tools).
type ToolMap struct {
	claudert.ToolMapping
	Line int `json:"line"`
}

// modelAliases are the model names a Claude Code subagent file may give besides a model id
// and "inherit" (the pinned Claude Code's subagent model enum); claude --model resolves each
// as Claude Code resolves it for a subagent.
var modelAliases = []string{"sonnet", "opus", "haiku", "fable"}

// mapModel maps a subagent file's model to the model of the subagent in agora.
func mapModel(m string) (model, note, refused string) {
	switch {
	case m == "":
		return "", "no model: claude's default", ""
	case m == "inherit":
		return "", "inherit: a dispatch has no parent conversation, so claude's default", ""
	case slices.Contains(modelAliases, m):
		return m, "", ""
	case isModelID(m):
		return m, "", ""
	}
	return "", "", fmt.Sprintf("model %q: want %s, inherit or a model id such as claude-sonnet-4-5", m, strings.Join(modelAliases, ", "))
}

// isModelID reports whether m reads as an Anthropic model id: claude- then lowercase
// letters, digits, '.' and '-', at most 100 bytes.
func isModelID(m string) bool {
	rest, ok := strings.CutPrefix(m, "claude-")
	if !ok || rest == "" || len(m) > 100 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// Map works out what agora registers for a: its grant, entry by entry, and its model. A file
// without tools (Claude Code: every tool) takes defaults when there are any, and is refused
// otherwise. Every problem is returned with its line.
func Map(a *Agent, defaults []Tool) (*Imported, strictyaml.Errors) {
	var errs strictyaml.Errors
	at := func(line int, path, format string, args ...any) {
		errs = append(errs, strictyaml.Error{File: a.File, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	im := &Imported{Agent: a, Capability: a.Name + CapabilitySuffix, Tools: []ToolMap{}}
	if err := catalog.CheckName(catalog.KindSubagent, a.Name); err != nil {
		at(a.NameLine, "name", "%v", err)
	} else if len(a.Name) > maxNameLen {
		at(a.NameLine, "name", "%q is longer than %d characters, the most agora can name its capability (NAME%s) for", a.Name, maxNameLen, CapabilitySuffix)
	}
	entries := a.Tools
	if !a.ToolsSet {
		if len(defaults) == 0 {
			at(a.ToolsLine, "tools", "no tools: Claude Code gives such a subagent every tool (an empty tools too), more than agora can grant exactly; list its tools, or pass --default-tools")
		}
		entries, im.DefaultTools = defaults, len(defaults) > 0
	}
	var sets []grant.Set
	for _, t := range entries {
		m := claudert.MapTool(t.Entry)
		if m.Refused != "" {
			at(t.Line, "tools", "%s: %s", agenttext.Escape(t.Entry), m.Refused)
			continue
		}
		im.Tools = append(im.Tools, ToolMap{ToolMapping: m, Line: t.Line})
		sets = append(sets, m.Grant)
	}
	model, note, refused := mapModel(a.Model)
	if refused != "" {
		at(a.ModelLine, "model", "%s", refused)
	}
	im.Model, im.ModelNote = model, note
	if len(errs) > 0 {
		return nil, errs
	}
	im.Grant = union(sets)
	if d := claudert.Dropped(claudert.Grants{Set: im.Grant}); len(d) > 0 {
		// Each entry translated on its own; together they must too.
		at(a.ToolsLine, "tools", "the grant would not translate back exactly: %s", strings.Join(d, "; "))
		return nil, errs
	}
	return im, nil
}

// union is the normal form of the sets together: each list sorted and without duplicates,
// never nil.
func union(sets []grant.Set) grant.Set {
	var u grant.Set
	for _, s := range sets {
		u = u.Union(s)
	}
	out := grant.Set{Tools: sortedUnique(u.Tools), Commands: sortedUnique(u.Commands), Egress: grant.NormalRules(u.Egress)}
	if out.Egress == nil {
		out.Egress = []grant.EgressRule{}
	}
	return out
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// ParseDefaultTools reads the default tools of an import (--default-tools, a manifest's
// default_tools): a tools string as a subagent file writes it. Every entry must map.
func ParseDefaultTools(s string) ([]Tool, error) {
	var tools []Tool
	var bad []string
	for _, e := range SplitTools(s) {
		if m := claudert.MapTool(e); m.Refused != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", agenttext.Escape(e), m.Refused))
		}
		tools = append(tools, Tool{Entry: e})
	}
	switch {
	case len(bad) > 0:
		return nil, errors.New(strings.Join(bad, "; "))
	case len(tools) == 0, len(tools) > maxTools:
		return nil, fmt.Errorf("want 1 to %d tools such as \"Read, Grep, Glob\"", maxTools)
	}
	return tools, nil
}
