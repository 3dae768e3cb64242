// Package ccimport imports Claude Code subagent files (.claude/agents/*.md: YAML front matter
// with name, description, tools and model; the body is the system prompt) into the catalog as
// claude-code subagents. Each file's tools map to an agora grant through
// [claudert.MapTool], the inverse of the runtime's own translation, and become a capability
// of their own (NAME.claude-tools) that the subagent pins.
//
// The import is deploy time and host side: `agora subagent import` and the manifest's
// import: key call it. It prepares versions for [provision.Writer]; the MCP server MUST NOT
// import it (a test of the import graph says so). Files are read strictly: the front matter
// through strictyaml, sizes capped, every problem reported with its file and line, and one
// problem anywhere refuses the whole import.
package ccimport

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// Limits on what a subagent file may hold. A Claude Code subagent file is a page of prose
// and a few lines of YAML; these keep a mistake (a binary, a pasted log) from being read.
const (
	// MaxFileSize caps one file: the catalog's 1 MiB prompt limit and room for the YAML.
	MaxFileSize = 1<<20 + 64<<10
	// maxFrontMatter caps the YAML between the --- lines.
	maxFrontMatter = 64 << 10
	// maxTools caps the entries of a file's tools.
	maxTools = 256
)

// Agent is one Claude Code subagent file as read, before its tools are mapped.
type Agent struct {
	// File is the file's path as the import was given it, for messages; Rel is its path
	// under the import's root, for records (no host path is recorded).
	File, Rel string
	// SHA256 is the digest of the file's bytes as read.
	SHA256 digest.Digest
	// Name and Description are the front matter's; a literal \n in the description is a
	// newline, as Claude Code reads it.
	Name, Description string
	// Tools are the entries of tools, split as Claude Code splits them (commas and spaces
	// outside parentheses). ToolsSet is false when tools is absent or empty, which Claude
	// Code reads as every tool.
	Tools    []Tool
	ToolsSet bool
	// Model is the front matter's model as written ("" when absent).
	Model string
	// Prompt is the body after the front matter, trimmed of surrounding white space.
	Prompt string
	// Lines of the front matter's keys in File (0 when absent).
	NameLine, ToolsLine, ModelLine int
}

// Tool is one entry of a subagent's tools and the line it is on (0: from --default-tools).
type Tool struct {
	Entry string
	Line  int
}

// frontMatter is the YAML a subagent file opens with: the fields agora honours, color (the
// agents UI's, without effect on what the subagent may do) and every other field the pinned
// Claude Code's subagent schema knows, each refused by name (see unsupported).
type frontMatter struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Tools       toolList `yaml:"tools"`
	Model       string   `yaml:"model"`
	Color       string   `yaml:"color"`

	DisallowedTools    ccField `yaml:"disallowedTools"`
	Prompt             ccField `yaml:"prompt"`
	Effort             ccField `yaml:"effort"`
	PermissionMode     ccField `yaml:"permissionMode"`
	MCPServers         ccField `yaml:"mcpServers"`
	Hooks              ccField `yaml:"hooks"`
	MaxTurns           ccField `yaml:"maxTurns"`
	AutoCompactWindow  ccField `yaml:"autoCompactWindow"`
	Skills             ccField `yaml:"skills"`
	InitialPrompt      ccField `yaml:"initialPrompt"`
	Memory             ccField `yaml:"memory"`
	Background         ccField `yaml:"background"`
	OmitClaudeMd       ccField `yaml:"omitClaudeMd"`
	Isolation          ccField `yaml:"isolation"`
	Observer           ccField `yaml:"observer"`
	ObserverMessage    ccField `yaml:"observerMessage"`
	ObserveToolResults ccField `yaml:"observeToolResults"`
	ObserveSubagents   ccField `yaml:"observeSubagents"`
	Experimental       ccField `yaml:"experimental"`
}

// unsupported lists the Claude Code fields agora cannot honour, with why, in the order a
// message names them.
func (fm *frontMatter) unsupported() []struct {
	key string
	set bool
	why string
} {
	type u = struct {
		key string
		set bool
		why string
	}
	const drop = "agora cannot honour it; remove it"
	return []u{
		{"disallowedTools", fm.DisallowedTools.set, "agora reads only tools: list what the subagent may use"},
		{"prompt", fm.Prompt.set, "the body after the front matter is the prompt"},
		{"effort", fm.Effort.set, drop},
		{"permissionMode", fm.PermissionMode.set, "agora runs claude in dontAsk mode, where the grant alone decides"},
		{"mcpServers", fm.MCPServers.set, "agora loads MCP servers only from a capability's mcp.json"},
		{"hooks", fm.Hooks.set, "agora runs claude with its own audit hook only"},
		{"maxTurns", fm.MaxTurns.set, "a dispatch is bounded by its timeout and budget; " + drop},
		{"autoCompactWindow", fm.AutoCompactWindow.set, drop},
		{"skills", fm.Skills.set, "agora loads no skills; " + drop},
		{"initialPrompt", fm.InitialPrompt.set, "a dispatch's input is its first message; " + drop},
		{"memory", fm.Memory.set, "a dispatch keeps no memory between runs; " + drop},
		{"background", fm.Background.set, drop},
		{"omitClaudeMd", fm.OmitClaudeMd.set, drop},
		{"isolation", fm.Isolation.set, "every dispatch runs in a sandbox of its own; " + drop},
		{"observer", fm.Observer.set, drop},
		{"observerMessage", fm.ObserverMessage.set, drop},
		{"observeToolResults", fm.ObserveToolResults.set, drop},
		{"observeSubagents", fm.ObserveSubagents.set, drop},
		{"experimental", fm.Experimental.set, drop},
	}
}

// ccField notes that a Claude Code field agora refuses was written; its value is not read.
type ccField struct{ set bool }

// UnmarshalStrictYAML records the field's presence.
func (c *ccField) UnmarshalStrictYAML(_ *strictyaml.Decoder, _ *yaml.Node, _ string) { c.set = true }

// toolList is tools as Claude Code accepts it: one string of entries, or a list of strings
// each holding one or more entries.
type toolList struct {
	entries []Tool
}

// UnmarshalStrictYAML decodes a string or a list of strings; null leaves the list empty.
func (l *toolList) UnmarshalStrictYAML(d *strictyaml.Decoder, n *yaml.Node, path string) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
	case n.Kind == yaml.ScalarNode:
		l.add(n)
	case n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				d.Errorf(item, fmt.Sprintf("%s[%d]", path, i), "want a tool such as Read or Bash(git diff:*)")
				continue
			}
			l.add(item)
		}
	default:
		d.Errorf(n, path, "want a comma-separated string of tools or a list of them")
	}
}

func (l *toolList) add(n *yaml.Node) {
	for _, e := range SplitTools(n.Value) {
		l.entries = append(l.entries, Tool{Entry: e, Line: n.Line})
	}
}

// SplitTools splits a Claude Code tools string into entries as Claude Code does: at commas
// and white space outside parentheses ("Read Grep, Bash(git log --format=%H,%s)" is three
// entries). Empty entries are dropped.
func SplitTools(s string) []string {
	var out []string
	depth, start := 0, 0
	flush := func(end int) {
		if e := s[start:end]; e != "" {
			out = append(out, e)
		}
	}
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			flush(i)
			start = i + utf8.RuneLen(r)
		}
	}
	flush(len(s))
	return out
}

// Parse reads one subagent file. skip is why the file is not a subagent file at all (it does
// not open with a "---" line: Claude Code skips such a file too); err lists every problem
// of a subagent file (a [strictyaml.Errors] with file and line).
func Parse(file, rel string, src []byte) (a *Agent, skip string, err error) {
	fail := func(line int, format string, args ...any) (*Agent, string, error) {
		return nil, "", strictyaml.Errors{{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}}
	}
	switch {
	case len(src) > MaxFileSize:
		return fail(0, "%d bytes, over the %d-byte limit of a subagent file", len(src), MaxFileSize)
	case !utf8.Valid(src) || bytes.IndexByte(src, 0) >= 0:
		return fail(0, "not UTF-8 text")
	}
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	head, body, opened, closed := splitFrontMatter(text)
	switch {
	case !opened:
		return nil, `does not open with a "---" line; Claude Code skips it too`, nil
	case !closed:
		return fail(1, `the front matter opened here is never closed by a "---" line`)
	case len(head) > maxFrontMatter:
		return fail(1, "front matter is over %d bytes", maxFrontMatter)
	}
	var fm frontMatter
	// A blank line in place of the opening "---" keeps the YAML's line numbers the file's,
	// in positions and in messages ("first at line 2") alike.
	pos, derr := strictyaml.Decode(file, []byte("\n"+head), &fm)
	errs, ok := strictyaml.Collect(derr)
	if !ok {
		var es strictyaml.Errors
		if !errors.As(derr, &es) {
			return fail(1, "front matter: %v", derr)
		}
		for i := range es {
			es[i].Msg += `; quote a value that holds ": " or " #" (Claude Code retries such a file with its values quoted, agora reads YAML exactly)`
		}
		return nil, "", es
	}
	line := pos.Line
	at := func(path, format string, args ...any) {
		errs = append(errs, strictyaml.Error{File: file, Line: line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for _, u := range fm.unsupported() {
		if u.set {
			at(u.key, "a Claude Code field agora does not support: %s", u.why)
		}
	}
	if strings.TrimSpace(fm.Name) == "" {
		at("name", "name is required (the subagent's name in agora, as in Claude Code)")
	}
	if strings.TrimSpace(fm.Description) == "" {
		at("description", "description is required (Claude Code skips a subagent without one)")
	}
	// A literal \n is a newline, as Claude Code reads it.
	description := strings.ReplaceAll(fm.Description, `\n`, "\n")
	if len(description) > provision.MaxDescriptionSize {
		at("description", "%d bytes; a subagent's description in agora is at most %d: shorten it (examples of when to use it can go in the prompt)",
			len(description), provision.MaxDescriptionSize)
	}
	if len(fm.Tools.entries) > maxTools {
		at("tools", "%d tools; at most %d", len(fm.Tools.entries), maxTools)
	}
	for _, f := range []struct{ key, value string }{{"name", fm.Name}, {"description", fm.Description}, {"model", fm.Model}} {
		if r, ok := hidden(f.value); ok {
			at(f.key, "holds %U, a character a person reading the file does not see; agora imports only text that reads as it is", r)
		}
	}
	bodyLine := strings.Count(head, "\n") + 3
	prompt := strings.TrimSpace(body)
	if prompt == "" {
		errs = append(errs, strictyaml.Error{File: file, Line: bodyLine, Msg: "the body (the subagent's system prompt) is empty"})
	}
	for i, l := range strings.Split(body, "\n") {
		if r, ok := hidden(l); ok {
			errs = append(errs, strictyaml.Error{File: file, Line: bodyLine + i,
				Msg: fmt.Sprintf("the prompt holds %U, a character a person reading the file does not see; agora imports only text that reads as it is", r)})
			break
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, "", errs
	}
	a = &Agent{
		File: file, Rel: rel, SHA256: digest.Sum(src),
		Name: fm.Name, Description: description,
		ToolsSet: len(fm.Tools.entries) > 0, Model: fm.Model, Prompt: prompt,
		NameLine: line("name"), ToolsLine: line("tools"), ModelLine: line("model"),
	}
	a.Tools = fm.Tools.entries
	return a, "", nil
}

// hidden returns the first character of s that [agenttext.Hidden] says a person does not see
// as it is (a control character, a bidirectional override, a line separator).
func hidden(s string) (rune, bool) {
	for _, r := range s {
		if agenttext.Hidden(r) {
			return r, true
		}
	}
	return 0, false
}

// splitFrontMatter splits text (LF line ends) into the YAML between an opening "---" first
// line and the next "---" line, and the body after it. Trailing blanks on a --- line are
// allowed, as Claude Code allows them.
func splitFrontMatter(text string) (head, body string, opened, closed bool) {
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t") != "---" {
		return "", "", false, false
	}
	off := 0
	for off <= len(rest) {
		line, _, more := strings.Cut(rest[off:], "\n")
		if strings.TrimRight(line, " \t") == "---" {
			end := off + len(line)
			if more {
				end++
			}
			return rest[:off], rest[end:], true, true
		}
		if !more {
			break
		}
		off += len(line) + 1
	}
	return "", "", true, false
}
