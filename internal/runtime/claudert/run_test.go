package claudert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

func TestRun_Success(t *testing.T) {
	t.Setenv("CLAUDERT_PARENT_ONLY", "must-not-leak")
	cfg, recPath := fakeConfig(t, "success")
	cfg.SystemPrompt = "You are a careful reviewer.\nNever push."
	cfg.Model = "claude-sonnet-4-5"
	cfg.MaxTurns = 8
	mcp := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"mcpServers":{"linter":{"command":"lint-mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.MCPConfig = mcp
	cfg.Grants = Grants{
		Set:        grant.Set{Tools: []string{"read_file", "run_command"}, Commands: []string{"git diff **", "git status"}},
		MCPServers: []string{"linter"},
	}
	var transcript, stderr bytes.Buffer
	cfg.Transcript, cfg.Stderr = &transcript, &stderr
	prompt := "Review the change in this repository.\n--dangerously-skip-permissions is just text here."

	got, err := Run(t.Context(), cfg, prompt)
	if err != nil {
		t.Fatalf("Run: %v (stderr %q)", err, stderr.String())
	}

	rec := readRecord(t, recPath)
	i := slices.IndexFunc(rec.Argv, func(a string) bool { return strings.HasPrefix(a, "--append-system-prompt-file=") })
	if i < 0 {
		t.Fatalf("no system prompt file in argv %q", rec.Argv)
	}
	spFile := strings.TrimPrefix(rec.Argv[i], "--append-system-prompt-file=")
	if filepath.Dir(filepath.Dir(spFile)) != cfg.TempDir {
		t.Errorf("system prompt file %s is not in TempDir %s", spFile, cfg.TempDir)
	}
	if diff := cmp.Diff(Args(cfg, spFile, ""), rec.Argv); diff != "" {
		t.Errorf("claude's argv is not Args (-want +got):\n%s", diff)
	}
	if rec.Stdin != prompt {
		t.Errorf("claude read stdin %q, want the prompt %q", rec.Stdin, prompt)
	}
	if rec.SystemPrompt != cfg.SystemPrompt {
		t.Errorf("claude read system prompt %q, want %q", rec.SystemPrompt, cfg.SystemPrompt)
	}
	if !strings.Contains(rec.MCPConfig, `"linter"`) {
		t.Errorf("claude read MCP config %q, want the capability's", rec.MCPConfig)
	}
	if rec.Cwd != cfg.Dir {
		t.Errorf("claude ran in %s, want %s", rec.Cwd, cfg.Dir)
	}
	for _, kv := range cfg.Env {
		if !slices.Contains(rec.Env, kv) {
			t.Errorf("claude's environment lacks %q", kv)
		}
	}
	if slices.ContainsFunc(rec.Env, func(kv string) bool { return strings.HasPrefix(kv, "CLAUDERT_PARENT_ONLY=") }) {
		t.Error("the worker's environment leaked into claude's")
	}
	for _, a := range rec.Argv {
		if strings.Contains(a, "careful reviewer") || strings.Contains(a, "Review the change") {
			t.Errorf("a prompt is in argv: %q", a)
		}
	}
	if left, _ := os.ReadDir(cfg.TempDir); len(left) != 0 {
		t.Errorf("prompt files left behind in TempDir: %v", left)
	}

	want := Result{
		Final:        "Reviewed: " + strings.TrimSpace(prompt),
		Subtype:      "success",
		Turns:        4,
		CostUSD:      0.0421,
		InputTokens:  40 + 1500 + 9000,
		OutputTokens: 350,
		SessionID:    "5f0d3c1e-8a7b-4e0f-9d2a-1b6c7e8f9a0b",
		Tools:        []string{"Bash", "Read", "TodoWrite"},
		ToolUses: []ToolUse{
			{ID: "toolu_01", Name: "Bash", InputSHA256: sha(`{"command":"git diff --stat","description":"Show the change"}`)},
			{ID: "toolu_02", Name: "Read", InputSHA256: sha(`{"file_path":"` + cfg.Dir + `/README.md"}`)},
			{ID: "toolu_03", Name: "Bash", InputSHA256: sha(`{"command":"rm -rf build"}`)},
		},
		Denials: []ToolUse{{ID: "toolu_03", Name: "Bash", InputSHA256: sha(`{"command":"rm -rf build"}`)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Result (-want +got):\n%s", diff)
	}
	types := transcriptLines(t, transcript.String())
	wantTypes := []string{"system", "assistant", "assistant", "user", "assistant", "user", "assistant", "user", "assistant", "result"}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("transcript event types (-want +got):\n%s", diff)
	}
	if !strings.Contains(transcript.String(), `"permissionMode":"dontAsk"`) {
		t.Errorf("the init event does not report the dontAsk mode:\n%s", transcript.String())
	}
}

func TestRun_NothingGrantedIsAcceptedByClaude(t *testing.T) {
	cfg, recPath := fakeConfig(t, "success")
	got, err := Run(t.Context(), cfg, "hello")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.Subtype != "success" {
		t.Errorf("got subtype %q, want success", got.Subtype)
	}
	rec := readRecord(t, recPath)
	if !slices.Contains(rec.Argv, "--tools=TodoWrite") || slices.Contains(rec.Argv, "--allowedTools") {
		t.Errorf("argv %q: want only TodoWrite loaded and no allow rules", rec.Argv)
	}
	if slices.ContainsFunc(rec.Argv, func(a string) bool { return strings.HasPrefix(a, "--append-system-prompt-file") }) {
		t.Errorf("argv %q names a system prompt file, but there is no system prompt", rec.Argv)
	}
}

func TestRun_Errors(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		check     func(t *testing.T, res Result, err error)
		wantTrLen int
	}{
		{
			name: "max turns: non-zero exit with the result",
			mode: "max_turns",
			check: func(t *testing.T, res Result, err error) {
				var ee *ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("got %v, want an *ExitError", err)
				}
				want := ExitError{Runtime: "claude-code", CLI: "claude", ExitCode: 1, Subtype: "error_max_turns", Detail: "Reached maximum number of turns (2)"}
				if *ee != want {
					t.Errorf("got %+v, want %+v", *ee, want)
				}
				if !res.IsError || res.Turns != 2 || res.Final != "Still working" {
					t.Errorf("got %+v, want the error result with the last text", res)
				}
				if got := err.Error(); got != "claude-code runtime: claude exited with code 1 (result error_max_turns): Reached maximum number of turns (2)" {
					t.Errorf("got message %q", got)
				}
			},
		},
		{
			name: "crash without a result event: the stderr tail",
			mode: "crash",
			check: func(t *testing.T, res Result, err error) {
				var ee *ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("got %v, want an *ExitError", err)
				}
				if ee.ExitCode != 3 || ee.Subtype != "" || ee.Detail != "some early noise Error: API Error: 529 overloaded_error" {
					t.Errorf("got %+v, want code 3, no subtype, the stderr tail", *ee)
				}
				if res.Final != "Starting" || res.SessionID == "" {
					t.Errorf("got %+v, want what was parsed before the crash", res)
				}
			},
		},
		{
			name: "exit zero without a result event",
			mode: "no_result",
			check: func(t *testing.T, res Result, err error) {
				if !errors.Is(err, ErrNoResult) {
					t.Fatalf("got %v, want ErrNoResult", err)
				}
			},
		},
		{
			name: "garbage interleaved",
			mode: "garbage",
			check: func(t *testing.T, res Result, err error) {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Skipped != 8 || res.Subtype != "success" || len(res.ToolUses) != 3 {
					t.Errorf("got Skipped %d Subtype %q %d tool uses, want 8, success, 3", res.Skipped, res.Subtype, len(res.ToolUses))
				}
			},
		},
		{
			name: "a line over the cap",
			mode: "huge",
			check: func(t *testing.T, res Result, err error) {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Skipped != 1 || res.Final != "Reviewed: go" {
					t.Errorf("got Skipped %d Final %q, want 1 and the result", res.Skipped, res.Final)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := fakeConfig(t, tt.mode, "FAKECLAUDE_HUGE="+strconv.Itoa(MaxEventBytes+1))
			var transcript bytes.Buffer
			cfg.Transcript = &transcript
			res, err := Run(t.Context(), cfg, "go")
			tt.check(t, res, err)
			if transcript.Len() > 0 {
				transcriptLines(t, transcript.String())
			}
		})
	}
}

func TestRun_ClaudeNotOnPath(t *testing.T) {
	empty := t.TempDir()
	_, err := Run(t.Context(), Config{Dir: t.TempDir(), Env: []string{"PATH=" + empty}}, "hi")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *NotFoundError", err)
	}
	want := `claude-code runtime: "claude" not found on PATH (PATH=` + empty + `)`
	if err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, execrt.ErrNotFound) {
		t.Errorf("got %v, want it to wrap execrt.ErrNotFound", err)
	}
}

func TestRun_ClaudeIsNotLookedUpInTheWorkersPath(t *testing.T) {
	t.Setenv("PATH", fakeDir+":"+os.Getenv("PATH"))
	_, err := Run(t.Context(), Config{Dir: t.TempDir(), Env: []string{"PATH=/nonexistent"}}, "hi")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *NotFoundError: only the PATH of Config.Env counts", err)
	}
}

func TestRun_BinaryAsAPath(t *testing.T) {
	cfg, _ := fakeConfig(t, "success")
	cfg.Binary = filepath.Join(fakeDir, "claude")
	cfg.Env = append(cfg.Env, "PATH=/usr/bin:/bin") // the last PATH wins; the fake is not on it
	if _, err := Run(t.Context(), cfg, "hi"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	cfg.Binary = filepath.Join(t.TempDir(), "claude")
	_, err := Run(t.Context(), cfg, "hi")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("got %v, want a *NotFoundError for a missing path", err)
	}
}

func TestRun_RelativeMCPConfigIsRefused(t *testing.T) {
	cfg, _ := fakeConfig(t, "success")
	cfg.MCPConfig = ".mcp.json" // inside the workspace, which the agent controls
	_, err := Run(t.Context(), cfg, "hi")
	if err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return !(i > 0 && i+2 < len(stat) && stat[i+2] == 'Z')
}

func TestRun_TimeoutAndCancelKillTheGroup(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		cancel  time.Duration
		want    error
	}{
		{"timeout", 500 * time.Millisecond, 0, ErrTimedOut},
		{"cancel", 0, 500 * time.Millisecond, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			cfg, _ := fakeConfig(t, "hang", "FAKECLAUDE_PIDFILE="+pidfile)
			cfg.Timeout = tt.timeout
			var transcript bytes.Buffer
			cfg.Transcript = &transcript
			ctx := t.Context()
			if tt.cancel > 0 {
				c, cancel := context.WithCancel(ctx)
				defer cancel()
				time.AfterFunc(tt.cancel, cancel)
				ctx = c
			}
			start := time.Now()
			res, err := Run(ctx, cfg, "hi")
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Run took %s", d)
			}
			if res.SessionID == "" {
				t.Errorf("got %+v, want the init event parsed", res)
			}
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatalf("read pids: %v", err)
			}
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				deadline := time.Now().Add(3 * time.Second)
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("pid %d (claude or its child) outlived Run", pid)
				}
			}
		})
	}
}

// signalWriter creates a file once a system/init event passes through it.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	file string
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(b, []byte(`"subtype":"init"`)) {
		if err := os.WriteFile(w.file, nil, 0o600); err != nil {
			return 0, err
		}
	}
	return w.buf.Write(b)
}

// TestRun_ParsesAsItArrives: the fake waits, before it writes its result, for proof that
// its init event reached the transcript; a Run that parsed only after exit would hang.
func TestRun_ParsesAsItArrives(t *testing.T) {
	goFile := filepath.Join(t.TempDir(), "go")
	cfg, _ := fakeConfig(t, "handshake", "FAKECLAUDE_GO="+goFile)
	w := &signalWriter{file: goFile}
	cfg.Transcript = w
	cfg.Timeout = 20 * time.Second
	res, err := Run(t.Context(), cfg, "hi")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Subtype != "success" {
		t.Errorf("got %+v, want success", res)
	}
}

// events is an [Observer] that keeps what it sees, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) Init(in Init) {
	e.add("init " + strings.Join(in.Tools, ",") + " " + in.PermissionMode)
}

func (e *events) ToolCall(c ToolCall) { e.add("call " + c.ID + " " + c.Name + " " + string(c.Input)) }

func (e *events) ToolResult(r ToolResult) {
	s := fmt.Sprintf("result %s error=%t use_error=%t no_such_tool=%t", r.ID, r.IsError, r.UseError, r.NoSuchTool)
	if r.PermissionDenied {
		s += " permission_denied=" + r.Tool
	}
	if r.HookBlocked {
		s += " hook_blocked=" + r.Tool
	}
	e.add(s)
}

// hookScript writes a hook that appends each event's JSON to dir/log (one line each, in
// order) and blocks (exit 2, a reason on stderr) every call whose input mentions "blocked".
func hookScript(t *testing.T) (argv []string, log string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "hook's script.sh") // a quote and a space: the argv is quoted
	body := `in=$(cat); printf '%s\n' "$in" >>"$1/log"
case $in in *blocked*) echo "agora: not recorded; refused" >&2; exit 2;; esac
exit 0
`
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", script, dir}, filepath.Join(dir, "log")
}

// TestRun_HooksAroundEachCall: with Config.HookCommand, claude runs it before each call to a
// loaded tool and after it, with the hook JSON on stdin; exit 2 blocks the call; a call to a
// tool that is not loaded runs no hook and is a "No such tool" tool_use_error. The observer
// sees each event as it happens, in order.
func TestRun_HooksAroundEachCall(t *testing.T) {
	calls := `[{"name":"Write","input":{"file_path":"x","content":"y"}},` +
		`{"name":"Bash","input":{"command":"touch ran"}},` +
		`{"name":"Bash","input":{"command":"touch blocked"}}]`
	cfg, recPath := fakeConfig(t, "tools", "FAKECLAUDE_TOOLS="+calls)
	cfg.Grants = Grants{Set: grant.Set{Tools: []string{"read_file", "run_command"}, Commands: []string{"touch **"}}}
	hook, log := hookScript(t)
	cfg.HookCommand = hook
	obs := &events{}
	cfg.Observer = obs
	res, err := Run(t.Context(), cfg, "go")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "ran")); err != nil {
		t.Errorf("the allowed call did not run: %v", err)
	}
	for _, name := range []string{"blocked", "x"} {
		if _, err := os.Stat(filepath.Join(cfg.Dir, name)); err == nil {
			t.Errorf("%s exists: a refused call ran", name)
		}
	}

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, log)), "\n") {
		var in struct {
			Event     string          `json:"hook_event_name"`
			Tool      string          `json:"tool_name"`
			Input     json.RawMessage `json:"tool_input"`
			ID        string          `json:"tool_use_id"`
			SessionID string          `json:"session_id"`
			Cwd       string          `json:"cwd"`
		}
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("hook input %q: %v", line, err)
		}
		if in.SessionID == "" || in.Cwd != cfg.Dir {
			t.Errorf("hook input %q lacks the session or the working directory", line)
		}
		got = append(got, in.Event+" "+in.ID+" "+in.Tool+" "+string(in.Input))
	}
	want := []string{
		`PreToolUse toolu_01FAKE000002 Bash {"command":"touch ran"}`,
		`PostToolUse toolu_01FAKE000002 Bash {"command":"touch ran"}`,
		`PreToolUse toolu_01FAKE000003 Bash {"command":"touch blocked"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook events (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		"init Bash,Read,TodoWrite dontAsk",
		`call toolu_01FAKE000001 Write {"content":"y","file_path":"x"}`,
		"result toolu_01FAKE000001 error=true use_error=true no_such_tool=true",
		`call toolu_01FAKE000002 Bash {"command":"touch ran"}`,
		"result toolu_01FAKE000002 error=false use_error=false no_such_tool=false",
		`call toolu_01FAKE000003 Bash {"command":"touch blocked"}`,
		"result toolu_01FAKE000003 error=true use_error=false no_such_tool=false hook_blocked=Bash",
	}
	if diff := cmp.Diff(wantEvents, obs.log); diff != "" {
		t.Errorf("observed events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Bash", "Read", "TodoWrite"}, res.Tools); diff != "" {
		t.Errorf("Result.Tools (-want +got):\n%s", diff)
	}
	rec := readRecord(t, recPath)
	i := slices.IndexFunc(rec.Argv, func(a string) bool { return strings.HasPrefix(a, "--settings=") })
	if i < 0 {
		t.Fatalf("no --settings in argv %q", rec.Argv)
	}
	if diff := cmp.Diff(Args(cfg, "", strings.TrimPrefix(rec.Argv[i], "--settings=")), rec.Argv); diff != "" {
		t.Errorf("claude's argv is not Args (-want +got):\n%s", diff)
	}
	if left, _ := os.ReadDir(cfg.TempDir); len(left) != 0 {
		t.Errorf("files left behind in TempDir: %v", left)
	}
}

// TestRun_HookCommandRefused: a hook word a shell could not be given safely is refused
// before claude starts.
func TestRun_HookCommandRefused(t *testing.T) {
	cfg, recPath := fakeConfig(t, "success")
	cfg.HookCommand = []string{"/bin/true", "a\nb"}
	if _, err := Run(t.Context(), cfg, "hi"); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("got %v, want a refusal naming the control character", err)
	}
	if _, err := os.Stat(recPath); err == nil {
		t.Error("claude ran")
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
