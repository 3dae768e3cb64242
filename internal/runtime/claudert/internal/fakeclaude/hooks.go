package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// The hooks claude runs around each tool call, configured in a settings file
// (https://code.claude.com/docs/en/hooks): per event, matcher groups, each a tool-name
// pattern ("*", "" or absent for every tool, an exact name, or a regular expression) and
// command hooks. A command runs through a shell with the event's JSON on stdin, in claude's
// working directory and environment plus CLAUDE_PROJECT_DIR; "timeout" is in seconds (60 when
// absent). For PreToolUse, exit 2 blocks the call and its stderr goes to the model, and exit 0
// with a JSON object on stdout may decide through hookSpecificOutput.permissionDecision
// ("deny" blocks; "allow" skips the allow rules, never the deny rules). Any other exit, a
// timeout included, is a non-blocking error: the call goes on. For PostToolUse, exit 2 shows
// stderr to the model (the tool already ran).

// defaultHookTimeout is claude's hook timeout when the settings give none.
const defaultHookTimeout = 60 * time.Second

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

type matcherGroup struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
}

// settingsFile is the part of a settings file the fake acts on; other keys are ignored.
type settingsFile struct {
	Hooks map[string][]matcherGroup `json:"hooks"`
}

// readSettings reads --settings: a file, or a JSON object given inline.
func readSettings(arg string) settingsFile {
	var s settingsFile
	if arg == "" {
		return s
	}
	b := []byte(arg)
	if !strings.HasPrefix(strings.TrimSpace(arg), "{") {
		var err error
		if b, err = os.ReadFile(arg); err != nil {
			fail("Error: Settings file not found: %s", arg)
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		fail("Error: Invalid settings: %v", err)
	}
	for ev, groups := range s.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				if h.Type != "command" || h.Command == "" {
					fail("Error: Invalid settings: hooks.%s: a hook needs type \"command\" and a command", ev)
				}
			}
		}
	}
	return s
}

func (g matcherGroup) matches(tool string) bool {
	switch g.Matcher {
	case "", "*":
		return true
	case tool:
		return true
	}
	re, err := regexp.Compile("^(?:" + g.Matcher + ")$")
	return err == nil && re.MatchString(tool)
}

// hookOutcome is what the hooks of one event decided.
type hookOutcome struct {
	block  bool   // exit 2, or a "deny" decision
	allow  bool   // a PreToolUse "allow" decision
	reason string // stderr of a blocking hook, or the decision's reason
}

// runHooks runs every hook of event matching tool, in order, with input on stdin. A
// blocking hook's reason is claude's: "['COMMAND']: " and its stderr.
func (c *claude) runHooks(event, tool string, input obj) hookOutcome {
	var out hookOutcome
	body, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	for _, g := range c.settings.Hooks[event] {
		if !g.matches(tool) {
			continue
		}
		for _, h := range g.Hooks {
			timeout := defaultHookTimeout
			if h.Timeout > 0 {
				timeout = time.Duration(h.Timeout) * time.Second
			}
			code, stdout, stderr := runHook(h.Command, body, c.cwd, timeout)
			switch {
			case code == 2:
				out.block = true
				out.reason = "['" + h.Command + "']: " + stderr
			case code == 0 && strings.HasPrefix(strings.TrimSpace(stdout), "{"):
				var d struct {
					Specific struct {
						Decision string `json:"permissionDecision"`
						Reason   string `json:"permissionDecisionReason"`
					} `json:"hookSpecificOutput"`
				}
				if json.Unmarshal([]byte(stdout), &d) == nil {
					switch d.Specific.Decision {
					case "deny":
						out.block, out.reason = true, d.Specific.Reason
					case "allow":
						out.allow = true
					}
				}
			}
			if out.block {
				return out
			}
		}
	}
	return out
}

// runHook runs one hook command through a shell and returns its exit code (-1 when it timed
// out or could not start) and output.
func runHook(command string, stdin []byte, cwd string, timeout time.Duration) (int, string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "CLAUDE_PROJECT_DIR="+cwd)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case ctx.Err() != nil:
		return -1, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	return -1, stdout.String(), stderr.String()
}
