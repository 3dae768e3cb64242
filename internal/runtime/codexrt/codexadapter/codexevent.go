package codexadapter

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/agora-dev/agora/internal/strictjson"
)

// modelAnswerTool is the tool name a refusal of the model's answer itself is audited under
// (an event the gate cannot read exactly, an item codex must not act on): no tool ran.
const modelAnswerTool = "model_response"

// modelCall is one call of a tool the model makes, as the relay's gate read it from the
// model's answer, before codex sees it.
type modelCall struct {
	ID   string // the API's call_id
	Tool string // the tool as the model named it (exec_command, apply_patch, ...)
	// Exec is an exec_command call's arguments (nil for other tools, and for an exec_command
	// item whose arguments have not arrived yet).
	Exec *execArgs
	// Paths are the paths an apply_patch call's patch names in its headers (see
	// patchPaths), judged before codex applies it: Codex reports a moved file's old path
	// only, and a file written into .git would change what the next granted git command runs.
	Paths []string
	// Patch is an apply_patch call's patch text (nil until it has arrived): a learn dispatch
	// rewrites its paths outside the workspace into the scratch directory (codexlearn.go).
	Patch *string
	// Refused says why the gate refuses the call whatever the grant; "" lets the grant decide.
	Refused string
}

// execArgs are the arguments of Codex's exec_command that decide what it runs: the script,
// the shell it runs the script in, and whether that shell is a login shell (-lc or -c).
type execArgs struct {
	Cmd   *string `json:"cmd"`
	Shell *string `json:"shell"`
	Login *bool   `json:"login"`
}

// wireItem is the part of a Responses API output item the gate reads.
type wireItem struct {
	Type      string  `json:"type"`
	Name      string  `json:"name"`
	CallID    string  `json:"call_id"`
	Arguments *string `json:"arguments"`
	Input     *string `json:"input"` // a custom tool call's text (apply_patch's patch)
}

// wireEvent is the part of a Responses API stream event the gate reads: an item (added or
// done), or a response's whole output (which repeats the calls).
type wireEvent struct {
	Type     string    `json:"type"`
	Item     *wireItem `json:"item"`
	Response *struct {
		Output []wireItem `json:"output"`
	} `json:"response"`
}

// codexBookkeeping are the tools Codex offers that act on nothing outside codex itself (its
// plan, its goals, a question for the user): they pass without a decision. write_stdin is
// not one: see stdinCall.
func codexBookkeeping(name string) bool {
	switch name {
	case "update_plan", "request_user_input", "get_goal", "create_goal", "update_goal":
		return true
	}
	return false
}

// codexStdinTool writes input to a command codex started (an exec_command session).
const codexStdinTool = "write_stdin"

// stdinCall reads write_stdin's arguments exactly: a call that writes no input (it polls a
// running command for output) passes without a decision; one that writes input is refused.
// What a running program does with its input is no command line agora can judge: a granted
// `sqlite3 app.db` runs ".shell CMD", a granted editor or interpreter anything, so input is refused whatever the grant. An item whose arguments have not
// arrived yet has none to judge.
func stdinCall(raw *string) string {
	if raw == nil || *raw == "" {
		return ""
	}
	var a struct {
		Chars *string `json:"chars"`
	}
	if err := strictjson.CheckObject([]byte(*raw)); err != nil {
		return "write_stdin arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	if err := strictjson.UnmarshalKnown([]byte(*raw), &a); err != nil {
		return "write_stdin arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*raw), &keys); err != nil {
		return "write_stdin arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	for k := range keys {
		switch k {
		case "session_id", "chars", "yield_time_ms", "max_output_tokens":
		default:
			return fmt.Sprintf("write_stdin arguments hold %q, which Codex's tool does not offer and agora cannot judge", clipText(k, 64))
		}
	}
	if a.Chars != nil && *a.Chars != "" {
		return "the model asked codex to write input to a running command (write_stdin), which agora cannot judge: what a program does with its input is no command line the grant names"
	}
	return ""
}

// eventCalls returns the calls one event's data carries, or why it cannot be read exactly.
// Every event is decoded with strictjson, whatever its type: Codex reads each key exactly
// (serde), so an event with two keys equal under case folding ("cmd" and "Cmd", "type" and
// "Type") or a key that only folds to one the gate reads would say one thing to the gate and
// another to Codex. Every item found (an event's item, a response's output) is a call to
// judge unless it is a message or reasoning: an item type or tool agora does not know is
// refused, not passed.
func eventCalls(payload []byte) ([]modelCall, string) {
	var ev wireEvent
	if err := strictjson.UnmarshalKnown(payload, &ev); err != nil {
		return nil, "the model's answer holds an event agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	var items []wireItem
	if ev.Item != nil {
		items = append(items, *ev.Item)
	}
	if ev.Response != nil {
		items = append(items, ev.Response.Output...)
	}
	var calls []modelCall
	for _, it := range items {
		if c, ok := itemCall(it); ok {
			calls = append(calls, c)
		}
	}
	return calls, ""
}

// itemCall returns the call an output item makes, if it makes one.
func itemCall(it wireItem) (modelCall, bool) {
	c := modelCall{ID: it.CallID, Tool: it.Name}
	switch it.Type {
	case "message", "reasoning", "tool_search_call":
		// tool_search searches the metadata of deferred tools (agora configures none): a tool
		// it would expose is still a call the gate judges by name.
		return c, false
	case "function_call":
		switch {
		case it.Name == codexExecTool:
			c.Exec, c.Refused = execCall(it.Arguments)
		case it.Name == codexPatchTool:
			c.Paths, c.Patch, c.Refused = patchArgs(it.Arguments)
		case it.Name == codexStdinTool:
			c.Refused = stdinCall(it.Arguments)
		case codexBookkeeping(it.Name):
		default:
			c.Refused = fmt.Sprintf("the model called %q, a tool agora does not let codex run", clipText(it.Name, 64))
		}
	case "custom_tool_call":
		if it.Name != codexPatchTool {
			c.Refused = fmt.Sprintf("the model called %q, a tool agora does not let codex run", clipText(it.Name, 64))
		} else if it.Input != nil {
			c.Paths, c.Patch = patchPaths(*it.Input), it.Input
		}
	default:
		c.Tool = modelAnswerTool
		c.Refused = fmt.Sprintf("the model's answer holds an item of type %q, which agora does not let codex act on", clipText(it.Type, 64))
	}
	return c, true
}

// execCall reads exec_command's arguments. An item whose arguments have not arrived yet
// ("" in response.output_item.added) runs nothing and has none to judge.
func execCall(raw *string) (*execArgs, string) {
	if raw == nil || *raw == "" {
		return nil, ""
	}
	var a execArgs
	if err := strictjson.CheckObject([]byte(*raw)); err != nil {
		return nil, "exec_command arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	if err := strictjson.UnmarshalKnown([]byte(*raw), &a); err != nil {
		return nil, "exec_command arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	if a.Cmd == nil {
		return nil, "exec_command arguments name no cmd"
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*raw), &keys); err != nil {
		return nil, "exec_command arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	for k := range keys {
		if !execArgKnown(k) {
			return nil, fmt.Sprintf("exec_command arguments hold %q, which Codex's tool does not offer and agora cannot judge", clipText(k, 64))
		}
	}
	return &a, ""
}

// patchArgs reads the arguments of apply_patch called as a function ({"input": PATCH}, what
// Codex's handler reads from a function call as from the custom tool's input) and returns the
// patch's paths. An item whose arguments have not arrived yet has none.
func patchArgs(raw *string) ([]string, *string, string) {
	if raw == nil || *raw == "" {
		return nil, nil, ""
	}
	var a struct {
		Input *string `json:"input"`
	}
	if err := strictjson.CheckObject([]byte(*raw)); err != nil {
		return nil, nil, "apply_patch arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	if err := strictjson.UnmarshalKnown([]byte(*raw), &a); err != nil {
		return nil, nil, "apply_patch arguments agora cannot read exactly: " + clipText(err.Error(), 160)
	}
	if a.Input == nil {
		return nil, nil, "apply_patch arguments name no input"
	}
	return patchPaths(*a.Input), a.Input, ""
}

// patchPaths returns the path of every line of an apply_patch patch that could be one of its
// file headers ("*** Add File: PATH", "*** Delete File: PATH", "*** Update File: PATH",
// "*** Move to: PATH"): any line that, blanks trimmed, starts with "*" and, the stars and
// blanks after them trimmed, with "add", "delete", "update" or "move" in any case; its path
// is what follows the first ":" ("" when there is none, which no check allows). Codex's own
// headers are exactly those words at the start of a line; reading more lines as headers than
// Codex does can only refuse a patch, never pass one. A move is the one change Codex's JSONL
// does not name (it reports the moved file's old path, so the check of what codex changed
// would see a file in the workspace; a move to /tmp/.bash_profile would run in
// the next granted command's login shell), and a write into .git changes what the next
// granted git command runs: both are judged here, before codex applies anything.
func patchPaths(patch string) []string {
	var paths []string
	for _, line := range strings.FieldsFunc(patch, func(r rune) bool { return r == '\n' || r == '\r' }) {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "*") {
			continue
		}
		rest := strings.ToLower(strings.TrimLeftFunc(t, func(r rune) bool { return r == '*' || unicode.IsSpace(r) }))
		if !strings.HasPrefix(rest, "add") && !strings.HasPrefix(rest, "delete") && !strings.HasPrefix(rest, "update") && !strings.HasPrefix(rest, "move") {
			continue
		}
		_, path, _ := strings.Cut(strings.TrimLeftFunc(t, func(r rune) bool { return r == '*' || unicode.IsSpace(r) }), ":")
		paths = append(paths, path)
	}
	return paths
}

// execArgKnown reports whether k is one of the arguments Codex 0.169.0's exec_command offers
// the model (its tool schema). The gate judges cmd, shell and login; the others change how
// the command is run (its directory, a terminal, how long to wait, how much output) but not
// what runs. Any other key is refused: Codex may read it (an alias, a field its schema does
// not show, such as a remote environment's id) in a way the gate cannot see.
func execArgKnown(k string) bool {
	switch k {
	case "cmd", "shell", "login", "workdir", "tty", "yield_time_ms", "max_output_tokens",
		"sandbox_permissions", "justification", "prefix_rule":
		return true
	}
	return false
}

// clipText cuts s to at most n bytes, on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
