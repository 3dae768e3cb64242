package claudeadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a hook's input.
const (
	// maxHookInput caps what a hook reads on stdin: the tool's input, and after the call its
	// response. claude's own stream lines are capped at half this (claudert.MaxEventBytes).
	maxHookInput = 32 << 20
	// maxHookField caps the tool name and the call id a hook accepts.
	maxHookField = 256
)

// hookInput is what Claude Code gives a tool hook on stdin, as far as agora uses it
// (https://code.claude.com/docs/en/hooks, "Hook input"): the common fields, then per event
// tool_name, tool_input and tool_use_id, and after the call duration_ms (PostToolUse and
// PostToolUseFailure, since Claude Code 2.1) and is_interrupt (PostToolUseFailure). Other
// fields, tool_response among them, are read by nobody.
type hookInput struct {
	Event  string          // hook_event_name: one of claudert.HookEvents
	Tool   string          // tool_name
	Input  json.RawMessage // tool_input: a JSON object
	CallID string          // tool_use_id
	// DurationMS is the tool's run time as claude measured it, -1 when not given.
	DurationMS int64
	Interrupt  bool   // is_interrupt: the failure was an interruption
	Cwd        string // cwd: claude's working directory, which a relative file path is in
}

// parseHookInput reads a hook's stdin strictly: one JSON object with one reading (valid
// UTF-8, no key twice, even under case folding, bounded depth), whose fields agora uses
// have their exact names and types. Unknown fields are allowed: claude adds fields over
// releases. Errors name the field, never its value.
func parseHookInput(b []byte) (hookInput, error) {
	in := hookInput{DurationMS: -1}
	if len(b) > maxHookInput {
		return in, fmt.Errorf("hook input: over the %d byte limit", maxHookInput)
	}
	// Refused before the strict check reads it: a bare value's error would quote it, and the
	// input is the sandbox's (FuzzParseHookInput: a lone number was repeated back in full).
	// Empty input goes on to the strict check, whose "EOF" the hook has always said.
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		return in, errors.New("hook input: not a JSON object")
	}
	if err := strictjson.CheckObject(b); err != nil {
		return in, fmt.Errorf("hook input: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return in, errors.New("hook input: not a JSON object")
	}
	str := func(key string, dst *string) error {
		raw, ok := top[key]
		if !ok || json.Unmarshal(raw, dst) != nil || *dst == "" || len(*dst) > maxHookField {
			return fmt.Errorf("hook input: %s: want a string of 1 to %d bytes", key, maxHookField)
		}
		return nil
	}
	if err := str("hook_event_name", &in.Event); err != nil {
		return in, err
	}
	if !slices.Contains(claudert.HookEvents, in.Event) {
		return in, errors.New("hook input: hook_event_name: not a tool event")
	}
	if err := str("tool_name", &in.Tool); err != nil {
		return in, err
	}
	if err := str("tool_use_id", &in.CallID); err != nil {
		return in, err
	}
	in.Input = top["tool_input"]
	if len(in.Input) == 0 || in.Input[0] != '{' {
		return in, errors.New("hook input: tool_input: want a JSON object")
	}
	if raw, ok := top["duration_ms"]; ok && string(raw) != "null" {
		var ms float64
		if json.Unmarshal(raw, &ms) != nil || ms < 0 || ms > maxDurationMS {
			return in, fmt.Errorf("hook input: duration_ms: want 0 to %d", int64(maxDurationMS))
		}
		in.DurationMS = int64(ms)
	}
	if raw, ok := top["cwd"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &in.Cwd) != nil {
			return in, errors.New("hook input: cwd: want a string")
		}
	}
	if raw, ok := top["is_interrupt"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &in.Interrupt) != nil {
			return in, errors.New("hook input: is_interrupt: want a boolean")
		}
	}
	return in, nil
}

// maxDurationMS bounds a reported duration as the gateway does (7 days).
const maxDurationMS = 7 * 24 * 60 * 60 * 1000

// bashCommand reads the command line of a Bash call's tool_input exactly as claude does: the
// member "command", spelt so, a string (the whole input passed strictjson's check, so no other
// member equals it under case folding, and none appears twice). Errors name the field, never
// its value.
func bashCommand(input json.RawMessage) (string, error) {
	var m map[string]json.RawMessage
	if err := strictjson.Unmarshal(input, &m); err != nil {
		return "", fmt.Errorf("Bash input: %w", err)
	}
	raw, ok := m["command"]
	if !ok {
		return "", errors.New("Bash input: no \"command\"")
	}
	var line string
	if err := strictjson.Unmarshal(raw, &line); err != nil {
		return "", errors.New("Bash input: \"command\" is not a string")
	}
	return line, nil
}

// editField names the member of a Claude Code tool's input that names the file it writes,
// or "" for a tool that writes none.
func editField(tool string) string {
	switch tool {
	case "Write", "Edit", "MultiEdit":
		return "file_path"
	case "NotebookEdit":
		return "notebook_path"
	}
	return ""
}

// editedPath reads the path a file-writing tool's input names, exactly (see bashCommand); ok
// is false for a tool that writes no file.
func editedPath(tool string, input json.RawMessage) (path string, ok bool, err error) {
	field := editField(tool)
	if field == "" {
		return "", false, nil
	}
	var m map[string]json.RawMessage
	if err := strictjson.Unmarshal(input, &m); err != nil {
		return "", true, fmt.Errorf("%s input: %w", tool, err)
	}
	raw, found := m[field]
	if !found {
		return "", true, fmt.Errorf("%s input: no %q", tool, field)
	}
	if err := strictjson.Unmarshal(raw, &path); err != nil || path == "" {
		return "", true, fmt.Errorf("%s input: %q is not a path", tool, field)
	}
	return path, true, nil
}

// editRefusal says why a file tool may not write path (relative to cwd when not absolute),
// or "": inside a .git directory (named so, or reached through a symlink; see
// grant.InGitDir), or, where it resolves (as far as the path exists, a dangling link
// followed), outside the workspace. Claude Code's own Edit(./**) rule keeps writes in its
// working directory too; agora does not rest on it.
func editRefusal(path, cwd, workspace string) string {
	const gitWhy = "a file tool never writes inside a .git directory (git's own configuration names programs git runs)"
	if !filepath.IsAbs(path) {
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		path = filepath.Join(cwd, path)
	}
	if grant.InGitDir(path) {
		return gitWhy
	}
	resolved, ok := agentrun.ResolvedRel("/", path)
	switch {
	case !ok:
		return "the path cannot be resolved"
	case grant.InGitDir(resolved):
		return gitWhy
	case workspace == "":
		return ""
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "the workspace cannot be resolved"
	}
	if rel, err := filepath.Rel(root, "/"+resolved); err != nil || !filepath.IsLocal(rel) {
		return agentrun.RefusalOutsideWorkspace
	}
	return ""
}
