package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// claude is one run's tool state: what is loaded, the permission rules, the hooks, and the
// calls refused by the permission rules (the result's permission_denials).
type claude struct {
	o        opts
	cwd      string
	settings settingsFile
	loaded   []string
	allow    []string
	deny     []string
	denials  []obj
	calls    int
}

// newClaude loads the tools the way claude does: --tools, or the default set, less every
// tool a bare --disallowedTools rule names (such a tool is not loaded at all), plus
// FAKECLAUDE_EXTRA_TOOLS, a comma-separated list standing in for tools a claude loads
// whatever its flags say (a newer release's, a managed setting's, an MCP server's).
func newClaude(o opts, cwd string) *claude {
	c := &claude{o: o, cwd: cwd, settings: readSettings(o.one("--settings")),
		allow: o.list("--allowedTools"), deny: o.list("--disallowedTools")}
	tools := o.list("--tools")
	if !o.set["--tools"] {
		tools = []string{"Bash", "Edit", "Glob", "Grep", "Read", "TodoWrite", "WebFetch", "Write"}
	}
	for _, t := range tools {
		if !slices.Contains(c.deny, t) {
			c.loaded = append(c.loaded, t)
		}
	}
	for _, t := range strings.Split(os.Getenv("FAKECLAUDE_EXTRA_TOOLS"), ",") {
		if t != "" && !slices.Contains(c.loaded, t) {
			c.loaded = append(c.loaded, t)
		}
	}
	return c
}

// nextID returns a fresh tool_use id in the shape the API gives them.
func (c *claude) nextID() string {
	c.calls++
	return fmt.Sprintf("toolu_01FAKE%06d", c.calls)
}

// hookInput is the JSON every tool hook gets on stdin.
func (c *claude) hookInput(event, id, name string, input obj) obj {
	return obj{
		"session_id":      session,
		"transcript_path": filepath.Join(os.Getenv("HOME"), ".claude", "projects", "fake", session+".jsonl"),
		"cwd":             c.cwd,
		"permission_mode": c.o.one("--permission-mode"),
		"prompt_id":       "3e36b81c-012f-4313-9972-d003e40d7217",
		"hook_event_name": event,
		"tool_name":       name,
		"tool_input":      input,
		"tool_use_id":     id,
	}
}

// use makes one tool call the way claude does and returns the tool_result content and
// whether it is an error: a tool that is not loaded is a tool_use_error before any hook;
// then the PreToolUse hooks, then the permission rules, then the tool, then PostToolUse (or
// PostToolUseFailure when the tool failed). The refusals' wording, and which refusals land
// in permission_denials (a rule's and a blocking hook's, not an unloaded tool's), are Claude
// Code 2.1.197's, seen running it against a scripted Messages API.
func (c *claude) use(id, name string, input obj) (string, bool) {
	if !slices.Contains(c.loaded, name) {
		return "<tool_use_error>Error: No such tool available: " + name + ". " + name +
			" exists but is not enabled in this context. Use one of the available tools instead.</tool_use_error>", true
	}
	pre := c.runHooks("PreToolUse", name, c.hookInput("PreToolUse", id, name, input))
	if pre.block {
		c.denials = append(c.denials, obj{"tool_name": name, "tool_use_id": id, "tool_input": input})
		return "PreToolUse:" + name + " hook error: " + pre.reason, true
	}
	if !c.permitted(name, input, pre.allow) {
		c.denials = append(c.denials, obj{"tool_name": name, "tool_use_id": id, "tool_input": input})
		if c.o.one("--permission-mode") == "dontAsk" {
			return "Permission to use " + name + " has been denied because Claude Code is running in don't ask mode.", true
		}
		return "Permission to use " + name + " has been denied.", true
	}
	start := time.Now()
	content, response, err := c.execute(name, input)
	ms := time.Since(start).Milliseconds()
	if err != nil {
		in := c.hookInput("PostToolUseFailure", id, name, input)
		in["error"], in["is_interrupt"], in["duration_ms"] = err.Error(), false, ms
		c.runHooks("PostToolUseFailure", name, in)
		return err.Error(), true
	}
	in := c.hookInput("PostToolUse", id, name, input)
	in["tool_response"], in["duration_ms"] = response, ms
	if post := c.runHooks("PostToolUse", name, in); post.block {
		content += "\n\nPostToolUse:" + name + " hook error: " + post.reason
	}
	return content, false
}

// permitted applies the permission rules in claude's order: a deny rule, then an allow rule
// (or a hook's "allow"), then the mode, where dontAsk denies whatever is not allowed. Reads
// under the working directory and TodoWrite need no rule.
func (c *claude) permitted(name string, input obj, hookAllow bool) bool {
	for _, r := range c.deny {
		if ruleMatches(r, name, input, c.cwd) {
			return false
		}
	}
	if hookAllow || c.o.one("--permission-mode") == "bypassPermissions" || name == "TodoWrite" {
		return true
	}
	switch name {
	case "Read", "Glob", "Grep":
		if p, _ := input["file_path"].(string); p == "" || inside(c.cwd, p) {
			return true
		}
	}
	for _, r := range c.allow {
		if ruleMatches(r, name, input, c.cwd) {
			return true
		}
	}
	return false
}

// ruleMatches reports whether permission rule r ("Tool", "Tool(specifier)", "mcp__server")
// covers the call.
func ruleMatches(r, name string, input obj, cwd string) bool {
	tool, spec, hasSpec := strings.Cut(r, "(")
	spec = strings.TrimSuffix(spec, ")")
	if strings.HasPrefix(tool, "mcp__") && !hasSpec {
		return name == tool || strings.HasPrefix(name, tool+"__")
	}
	if tool == "Edit" && name == "Write" {
		tool = "Write" // Edit rules cover every tool that edits files
	}
	if tool != name {
		return false
	}
	if !hasSpec {
		return true
	}
	switch name {
	case "Bash":
		cmd, _ := input["command"].(string)
		if prefix, ok := strings.CutSuffix(spec, " *"); ok {
			return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
		}
		return cmd == spec
	case "Read", "Edit", "Write":
		p, _ := input["file_path"].(string)
		return spec == "./**" && inside(cwd, p)
	case "WebFetch":
		u, err := url.Parse(fmt.Sprint(input["url"]))
		return err == nil && "domain:"+u.Hostname() == spec
	}
	return false
}

// inside reports whether path p is under dir.
func inside(dir, p string) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// execute runs a tool and returns its content for the model and its response for
// PostToolUse, or the error it failed with.
func (c *claude) execute(name string, input obj) (string, any, error) {
	path := func() string {
		p, _ := input["file_path"].(string)
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(c.cwd, p)
		}
		return p
	}
	switch name {
	case "Bash":
		cmd := exec.Command("/bin/sh", "-c", fmt.Sprint(input["command"]))
		cmd.Dir = c.cwd
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return "", nil, fmt.Errorf("Exit code %d\n%s", ee.ExitCode(), out)
		}
		if err != nil {
			return "", nil, err
		}
		content := string(out)
		if content == "" {
			content = "(Bash completed with no output)"
		}
		return content, obj{"stdout": string(out), "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": len(out) == 0}, nil
	case "Read":
		b, err := os.ReadFile(path())
		if err != nil {
			return "", nil, fmt.Errorf("<tool_use_error>File does not exist.</tool_use_error>")
		}
		return string(b), obj{"type": "text", "file": obj{"filePath": path(), "content": string(b)}}, nil
	case "Write":
		if err := os.WriteFile(path(), []byte(fmt.Sprint(input["content"])), 0o644); err != nil {
			return "", nil, err
		}
		return "File created successfully at: " + path(), obj{"type": "create", "filePath": path()}, nil
	case "Edit":
		b, err := os.ReadFile(path())
		old, _ := input["old_string"].(string)
		if err != nil || old == "" || !strings.Contains(string(b), old) {
			return "", nil, fmt.Errorf("<tool_use_error>String to replace not found in file.</tool_use_error>")
		}
		s := strings.Replace(string(b), old, fmt.Sprint(input["new_string"]), 1)
		if err := os.WriteFile(path(), []byte(s), 0o644); err != nil {
			return "", nil, err
		}
		return "The file " + path() + " has been updated.", obj{"filePath": path()}, nil
	case "TodoWrite":
		return "Todos have been modified successfully.", obj{"newTodos": input["todos"]}, nil
	}
	if strings.HasPrefix(name, "mcp__") {
		return "fake MCP result", []obj{{"type": "text", "text": "fake MCP result"}}, nil
	}
	return "", nil, fmt.Errorf("the fake claude cannot run %s", name)
}

// toolCall is one call a script asks for.
type toolCall struct {
	Name  string `json:"name"`
	Input obj    `json:"input"`
}

// runScript plays FAKECLAUDE_TOOLS, a JSON array of {"name","input"} calls, as a model asking
// for each in turn: each call is an assistant event, then claude makes it, then a user event
// carries its result, as they happen.
func runScript(c *claude, final string) {
	var calls []toolCall
	if err := json.Unmarshal([]byte(os.Getenv("FAKECLAUDE_TOOLS")), &calls); err != nil {
		fail("fakeclaude: FAKECLAUDE_TOOLS: %v", err)
	}
	for i, tc := range calls {
		id := c.nextID()
		emit(assistant(fmt.Sprintf("msg_%02d", i+1), toolUse(id, tc.Name, tc.Input)))
		content, isErr := c.use(id, tc.Name, tc.Input)
		emit(toolResult(id, content, isErr))
	}
	emit(assistant("msg_final", text(final)))
	emit(result("success", len(calls)+1, &final, c.denialList()))
}

func (c *claude) denialList() []obj {
	if c.denials == nil {
		return []obj{}
	}
	return c.denials
}
