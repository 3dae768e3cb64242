package claudert

import (
	"encoding/json"
	"errors"
	"strings"
)

// HookEvents are the Claude Code hook events Run wires to [Config.HookCommand], for every
// tool (https://code.claude.com/docs/en/hooks):
//
//   - PreToolUse runs after the model asked for a call and before claude's own permission
//     check and the tool. Exit code 2 blocks the call and its stderr goes to the model; any
//     other non-zero code, or a timeout, is a non-blocking error and the call goes on. A
//     hook that must fail closed therefore exits 2 on every failure, within [HookTimeout].
//   - PostToolUse runs after a tool succeeded, before its result reaches the model.
//   - PostToolUseFailure runs after a tool ran and failed.
//
// A call refused before its tool ran (a tool that is not loaded, invalid input, a blocking
// PreToolUse hook, a permission rule) gets neither post event. claude reads its hooks once,
// at start (anthropics/claude-code#22679), so a settings file the agent changes during the
// run changes nothing.
//
// Seen running Claude Code 2.1.197 with Run's flags against a scripted Messages API: the
// hooks of --settings run although --setting-sources is empty; PreToolUse runs before the
// dontAsk permission check (a call the rules then deny got PreToolUse and no post event);
// PostToolUse and PostToolUseFailure inputs carry tool_use_id and duration_ms; a call a
// PreToolUse hook blocked with exit 2 is answered "PreToolUse:TOOL hook error: ..." and
// listed in the result's permission_denials.
var HookEvents = []string{"PreToolUse", "PostToolUse", "PostToolUseFailure"}

// HookTimeout is the default timeout ([Config.HookTimeout]), in seconds, claude gives each
// hook command. claude lets the
// call through when a PreToolUse hook times out, so the hook's own work MUST end well
// within it.
const HookTimeout = 120

// settingsJSON returns the settings file Run passes with --settings: hook runs for every
// tool at each of [HookEvents], and nothing else. claude runs a hook command through a
// shell, so each word of hook is single-quoted; a word holding a NUL or another control
// character is refused rather than quoted.
func settingsJSON(hook []string, timeout int) ([]byte, error) {
	if timeout <= 0 {
		timeout = HookTimeout
	}
	if len(hook) == 0 {
		return nil, errors.New("no hook command")
	}
	words := make([]string, len(hook))
	for i, w := range hook {
		q, err := shellQuote(w)
		if err != nil {
			return nil, err
		}
		words[i] = q
	}
	type command struct {
		Type    string `json:"type"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}
	type group struct {
		Matcher string    `json:"matcher"`
		Hooks   []command `json:"hooks"`
	}
	every := []group{{Matcher: "*", Hooks: []command{{Type: "command", Command: strings.Join(words, " "), Timeout: timeout}}}}
	hooks := map[string][]group{}
	for _, ev := range HookEvents {
		hooks[ev] = every
	}
	return json.Marshal(map[string]any{
		"hooks": hooks,
		// WebFetch first asks claude.ai whether a domain is blocked; inside agora the egress
		// proxy decides by the grant, and claude.ai is not a granted host. Claude Code's own
		// sandbox stays off: agora's sandbox and proxy are the boundary.
		"skipWebFetchPreflight": true,
		"sandbox":               map[string]any{"enabled": false},
	})
}

// shellQuote quotes w for a POSIX shell: inside single quotes nothing is special but the
// single quote itself, which is closed, escaped and reopened.
func shellQuote(w string) (string, error) {
	for _, r := range w {
		if r < 0x20 || r == 0x7f {
			return "", errors.New("hook command: a word holds a control character")
		}
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'", nil
}
