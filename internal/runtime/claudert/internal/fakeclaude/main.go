// Command fakeclaude stands in for Anthropic's claude CLI in claudert's tests. It parses its
// flags the way claude's own parser does (long options, --flag=value or --flag value,
// variadic lists that end at the next option), refuses the combinations claude refuses,
// reads the prompt from stdin, and writes the stream-json event shapes claude writes
// (system/init, assistant text and tool_use, user tool_result, result) to stdout, each as it
// happens.
//
// In the tools and api modes it makes tool calls the way claude does (tools.go): its init
// event lists the tools it loaded (--tools less the tools a bare --disallowedTools rule
// names); a call to any other tool is answered with a <tool_use_error> "No such tool
// available" and runs no hook; otherwise it runs the PreToolUse hooks of --settings with the
// hook JSON on stdin and honours their exit code and decision (hooks.go), applies the
// permission rules (--allowedTools, --disallowedTools, --permission-mode), runs the tool for
// real in its working directory (Bash, Read, Write, Edit, TodoWrite; MCP tools answer a fixed
// text), then runs the PostToolUse or PostToolUseFailure hooks. The success mode instead
// replays a recorded conversation and runs nothing.
//
// It is driven by its environment (claudert passes a complete one):
//
//	FAKECLAUDE_MODE    success (default), max_turns, crash, no_result, garbage, huge, hang,
//	                   handshake, tools (the calls of FAKECLAUDE_TOOLS), api (claude's loop
//	                   against the Messages API at ANTHROPIC_BASE_URL, see api.go)
//	FAKECLAUDE_TOOLS   a JSON array of {"name","input"}: the calls the model asks for (tools)
//	FAKECLAUDE_EXTRA_TOOLS  comma-separated tools loaded whatever the flags say (tools, api)
//	FAKECLAUDE_RECORD  file to write {"argv","stdin","system_prompt","mcp_config","cwd","env"}
//	FAKECLAUDE_PIDFILE file to append this pid and its child's pid to (hang)
//	FAKECLAUDE_HUGE    byte length of the text of the huge line (huge)
//	FAKECLAUDE_GO      file whose appearance lets a handshake run finish (handshake)
//	FAKECLAUDE_LINGER  how long to stay after the result event (api), as the real CLI does
//	                   while it flushes: a test's writer to its stdout then has that long
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

const session = "5f0d3c1e-8a7b-4e0f-9d2a-1b6c7e8f9a0b"

type flagKind int

const (
	boolean flagKind = iota
	single
	variadic
)

var flags = map[string]flagKind{
	"--print": boolean, "-p": boolean, "--verbose": boolean, "--strict-mcp-config": boolean,
	"--output-format": single, "--input-format": single, "--permission-mode": single,
	"--setting-sources": single, "--model": single, "--max-turns": single,
	"--append-system-prompt-file": single, "--system-prompt-file": single,
	"--system-prompt": single, "--append-system-prompt": single, "--settings": single,
	"--tools": variadic, "--allowedTools": variadic, "--allowed-tools": variadic,
	"--disallowedTools": variadic, "--disallowed-tools": variadic, "--mcp-config": variadic,
}

type opts struct {
	set        map[string]bool
	values     map[string][]string
	positional []string
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func parse(args []string) opts {
	o := opts{set: map[string]bool{}, values: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			o.positional = append(o.positional, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		kind, ok := flags[name]
		if !ok {
			fail("error: unknown option '%s'", name)
		}
		name = canonical(name)
		o.set[name] = true
		switch kind {
		case boolean:
			if hasVal {
				fail("error: option '%s' does not take an argument", name)
			}
		case single:
			if !hasVal {
				if i+1 >= len(args) {
					fail("error: option '%s <value>' argument missing", name)
				}
				i++
				val = args[i]
			}
			o.values[name] = []string{val}
		case variadic:
			if hasVal {
				o.values[name] = append(o.values[name], val)
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				o.values[name] = append(o.values[name], args[i])
			}
			if !hasVal && len(o.values[name]) == 0 {
				fail("error: option '%s <values...>' argument missing", name)
			}
		}
	}
	return o
}

func canonical(name string) string {
	switch name {
	case "-p":
		return "--print"
	case "--allowed-tools":
		return "--allowedTools"
	case "--disallowed-tools":
		return "--disallowedTools"
	}
	return name
}

func (o opts) one(name string) string {
	if v := o.values[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// list splits variadic values on commas and spaces outside parentheses, as claude does.
func (o opts) list(name string) []string {
	var out []string
	for _, v := range o.values[name] {
		depth, start := 0, 0
		for i, r := range v + "," {
			switch {
			case r == '(':
				depth++
			case r == ')':
				depth--
			case (r == ',' || r == ' ') && depth == 0:
				if s := strings.TrimSpace(v[start:i]); s != "" {
					out = append(out, s)
				}
				start = i + 1
			}
		}
	}
	return out
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		// As the real CLI prints it; FAKECLAUDE_VERSION lets a test see a version change.
		v := os.Getenv("FAKECLAUDE_VERSION")
		if v == "" {
			v = "2.1.0"
		}
		fmt.Println(v + " (Claude Code)")
		return
	}
	o := parse(os.Args[1:])
	if !o.set["--print"] {
		fail("fakeclaude: only --print is supported")
	}
	if o.one("--output-format") == "stream-json" && !o.set["--verbose"] {
		fail("Error: When using --print, --output-format=stream-json requires --verbose")
	}
	modes := []string{"default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"}
	if m := o.one("--permission-mode"); o.set["--permission-mode"] && !slices.Contains(modes, m) {
		fail("error: option '--permission-mode <mode>' argument '%s' is invalid. Allowed choices are %s.", m, strings.Join(modes, ", "))
	}
	if o.set["--setting-sources"] {
		for _, s := range strings.Split(o.one("--setting-sources"), ",") {
			if s != "" && !slices.Contains([]string{"user", "project", "local"}, s) {
				fail("Error: Invalid setting source: %s", s)
			}
		}
	}
	stdin, _ := io.ReadAll(os.Stdin)
	if len(o.positional) == 0 && len(strings.TrimSpace(string(stdin))) == 0 {
		fail("Error: Input must be provided either through stdin or as a prompt argument when using --print")
	}
	system := ""
	if f := o.one("--append-system-prompt-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fail("Error: %v", err)
		}
		system = string(b)
	}
	mcp := ""
	for _, f := range o.values["--mcp-config"] {
		b, err := os.ReadFile(f)
		if err != nil {
			fail("Error: Invalid MCP configuration: %v", err)
		}
		mcp += string(b)
	}
	cwd, _ := os.Getwd()
	if rec := os.Getenv("FAKECLAUDE_RECORD"); rec != "" {
		b, _ := json.Marshal(map[string]any{
			"argv": os.Args[1:], "stdin": string(stdin), "system_prompt": system,
			"mcp_config": mcp, "cwd": cwd, "env": os.Environ(),
		})
		if err := os.WriteFile(rec, b, 0o600); err != nil {
			fail("fakeclaude: %v", err)
		}
	}
	run(o, string(stdin), cwd)
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func raw(s string) { os.Stdout.WriteString(s + "\n") }

type obj = map[string]any

func initEvent(o opts, cwd string) obj {
	tools := newClaude(o, cwd).loaded
	if tools == nil {
		tools = []string{}
	}
	model := o.one("--model")
	if model == "" {
		model = "claude-sonnet-4-5-20250929"
	}
	return obj{
		"type": "system", "subtype": "init", "cwd": cwd, "session_id": session,
		"tools": tools, "mcp_servers": []obj{}, "model": model,
		"permissionMode": o.one("--permission-mode"), "slash_commands": []string{},
		"apiKeySource": "none", "output_style": "default", "uuid": "0b6e8a9c-0000-4000-8000-000000000001",
	}
}

func usage(in, out int) obj {
	return obj{"input_tokens": in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": out, "service_tier": "standard"}
}

func assistant(id string, content ...obj) obj {
	return obj{
		"type": "assistant", "parent_tool_use_id": nil, "session_id": session,
		"message": obj{
			"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
			"content": content, "stop_reason": nil, "stop_sequence": nil, "usage": usage(3, 12),
		},
	}
}

func text(s string) obj { return obj{"type": "text", "text": s} }

func toolUse(id, name string, input obj) obj {
	return obj{"type": "tool_use", "id": id, "name": name, "input": input}
}

func toolResult(id, content string, isError bool) obj {
	return obj{
		"type": "user", "parent_tool_use_id": nil, "session_id": session,
		"message": obj{"role": "user", "content": []obj{{"tool_use_id": id, "type": "tool_result", "content": content, "is_error": isError}}},
	}
}

func result(subtype string, turns int, final *string, denials []obj) obj {
	r := obj{
		"type": "result", "subtype": subtype, "is_error": subtype != "success",
		"duration_ms": 5234, "duration_api_ms": 4810, "num_turns": turns, "session_id": session,
		"total_cost_usd": 0.0421,
		"usage": obj{
			"input_tokens": 40, "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 9000,
			"output_tokens": 350, "server_tool_use": obj{"web_search_requests": 0}, "service_tier": "standard",
		},
		"permission_denials": denials, "uuid": "0b6e8a9c-0000-4000-8000-0000000000ff",
	}
	if final != nil {
		r["result"] = *final
	}
	if subtype != "success" {
		r["errors"] = []string{"Reached maximum number of turns (" + strconv.Itoa(turns) + ")"}
	}
	return r
}

// conversation is the body of a successful run: a diff, a read, a denied command.
func conversation(cwd string) {
	emit(assistant("msg_01", text("I'll look at the change first.")))
	emit(assistant("msg_02", toolUse("toolu_01", "Bash", obj{"command": "git diff --stat", "description": "Show the change"})))
	emit(toolResult("toolu_01", " README.md | 2 +-\n 1 file changed", false))
	emit(assistant("msg_03", toolUse("toolu_02", "Read", obj{"file_path": cwd + "/README.md"})))
	emit(toolResult("toolu_02", "     1\t# demo\n", false))
	emit(assistant("msg_04", toolUse("toolu_03", "Bash", obj{"command": "rm -rf build"})))
	emit(toolResult("toolu_03", "Permission to use Bash with command rm -rf build has been denied.", true))
}

var denied = []obj{{"tool_name": "Bash", "tool_use_id": "toolu_03", "tool_input": obj{"command": "rm -rf build"}}}

func run(o opts, prompt, cwd string) {
	final := "Reviewed: " + strings.TrimSpace(prompt)
	switch mode := os.Getenv("FAKECLAUDE_MODE"); mode {
	case "", "success":
		emit(initEvent(o, cwd))
		conversation(cwd)
		emit(assistant("msg_05", text(final)))
		emit(result("success", 4, &final, denied))
	case "max_turns":
		emit(initEvent(o, cwd))
		emit(assistant("msg_01", toolUse("toolu_01", "Bash", obj{"command": "git diff"})))
		emit(toolResult("toolu_01", "", false))
		emit(assistant("msg_02", text("Still working")))
		emit(result("error_max_turns", 2, nil, []obj{}))
		os.Exit(1)
	case "crash":
		emit(initEvent(o, cwd))
		emit(assistant("msg_01", text("Starting")))
		fmt.Fprintln(os.Stderr, "some early noise")
		fmt.Fprintln(os.Stderr, "Error: API Error: 529 overloaded_error")
		os.Exit(3)
	case "no_result":
		emit(initEvent(o, cwd))
		emit(assistant("msg_01", text("Starting")))
	case "garbage":
		raw("Warning: this line is not JSON")
		emit(initEvent(o, cwd))
		raw("")
		raw("{")
		raw("[1,2,3]")
		raw(`{"type":1}`)
		raw(`{"no_type":true}`)
		raw(`{"type":"assistant","TYPE":"result"}`)
		raw("\xff\xfe{}")
		raw(`{"type":"result"} trailing`)
		raw(`{"type":"stream_event","event":{"type":"message_start"}}`)
		conversation(cwd)
		emit(result("success", 4, &final, denied))
	case "huge":
		n, _ := strconv.Atoi(os.Getenv("FAKECLAUDE_HUGE"))
		emit(initEvent(o, cwd))
		emit(assistant("msg_01", text(strings.Repeat("x", n))))
		emit(result("success", 1, &final, []obj{}))
	case "hang":
		emit(initEvent(o, cwd))
		child := exec.Command("sleep", "60")
		if err := child.Start(); err != nil {
			fail("fakeclaude: %v", err)
		}
		pids := fmt.Sprintf("%d %d\n", os.Getpid(), child.Process.Pid)
		if err := os.WriteFile(os.Getenv("FAKECLAUDE_PIDFILE"), []byte(pids), 0o600); err != nil {
			fail("fakeclaude: %v", err)
		}
		time.Sleep(60 * time.Second)
	case "handshake":
		emit(initEvent(o, cwd))
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(os.Getenv("FAKECLAUDE_GO")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				fail("fakeclaude: nobody read the init event")
			}
			time.Sleep(5 * time.Millisecond)
		}
		emit(result("success", 1, &final, []obj{}))
	case "tools":
		emit(initEvent(o, cwd))
		runScript(newClaude(o, cwd), final)
	case "api":
		emit(initEvent(o, cwd))
		runAPI(newClaude(o, cwd), prompt)
		linger()
	default:
		fail("fakeclaude: unknown mode %q", mode)
	}
}

// linger waits FAKECLAUDE_LINGER (a Go duration) before the CLI exits.
func linger() {
	v := os.Getenv("FAKECLAUDE_LINGER")
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fail("fakeclaude: FAKECLAUDE_LINGER: %v", err)
	}
	time.Sleep(d)
}
