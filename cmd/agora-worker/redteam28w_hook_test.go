package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Claude Code runs `agora-worker worker hook ARGS` for
// every tool event. The slim program must decide exactly as the full agora binary's hidden
// `agora worker hook` does: same exit code, same stderr bytes, nothing on
// stdout, and the same reports (bytes) to the relay, for hostile stdin (duplicate keys,
// escapes, case folding, wrong types, huge input), hostile argv and hostile environment.
//
// testdata/hook-99408dd.json holds what the binary built from 99408dd did for each case
// below; rewrite it with
//
//	go build -o /tmp/agora-99408dd ./cmd/agora   # in a checkout of 99408dd
//	go test ./cmd/agora-worker -run RedTeam28W_HookSameAsPre28 -update-old=/tmp/agora-99408dd
var updateOld = flag.String("update-old", "", "rewrite testdata/hook-99408dd.json by running `BIN worker hook` (BIN built from 99408dd)")

// slimWorker runs the cases against a built agora-worker instead of this test binary:
//
//	CGO_ENABLED=0 go build -o /tmp/agora-worker ./cmd/agora-worker
//	go test ./cmd/agora-worker -run RedTeam28W_HookSameAsPre28 -slim-worker=/tmp/agora-worker
var slimWorker = flag.String("slim-worker", "", "run the cases against this agora-worker binary, not the test binary")

const goldenHook = "testdata/hook-99408dd.json"

// beWorker makes the test binary this package's main when set: the cases run the same run()
// main() runs, in a process of its own (its own environment and stdin).
const beWorker = "AGORA_RT28W_BE_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(beWorker) == "1" {
		os.Unsetenv(beWorker)
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hookCase is one hook event: argv after `worker hook` ("GW" is replaced by the relay's
// address), stdin, extra environment, and how the relay answers.
type hookCase struct {
	Name  string
	Args  []string
	Stdin string
	Env   []string
	// Relay: "" answers 204 to every report; "refuse" answers 400 with an error; "deny"
	// answers /approval with a denial.
	Relay string
}

// hookResult is what one run did.
type hookResult struct {
	Exit    int      `json:"exit"`
	Stdout  string   `json:"stdout"`
	Stderr  string   `json:"stderr"`
	Reports []string `json:"reports"` // "PATH BODY" per request the relay got, in order
}

func hookCases() []hookCase {
	base := []string{"--gateway=GW", "--tool=Bash", "--tool=Read", "--tool=Write", "--mcp=srv", "--command=git status", "--command=ls *"}
	ev := func(event, tool, input string, extra string) string {
		return `{"hook_event_name":"` + event + `","tool_name":"` + tool + `","tool_use_id":"toolu_01",` +
			`"cwd":"/workspace","tool_input":` + input + extra + `}`
	}
	huge := `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"toolu_01","tool_input":{"file_path":"/workspace/a","pad":"` +
		strings.Repeat("x", 33<<20) + `"}}`
	bigOK := ev("PostToolUse", "Read", `{"file_path":"/workspace/a"}`, `,"tool_response":"`+strings.Repeat("y", 4<<20)+`"`)
	return []hookCase{
		{Name: "pre allowed read", Args: base, Stdin: ev("PreToolUse", "Read", `{"file_path":"/workspace/a"}`, "")},
		{Name: "pre bash granted", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":"git status"}`, "")},
		{Name: "pre bash not granted", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":"curl evil"}`, "")},
		{Name: "pre bash two commands", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":"ls x; rm -rf /"}`, "")},
		{Name: "pre bash command escaped key", Args: base, Stdin: ev("PreToolUse", "Bash", `{"\u0063ommand":"rm -rf /"}`, "")},
		{Name: "pre bash command twice", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":"git status","command":"rm -rf /"}`, "")},
		{Name: "pre bash command case folded", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":"git status","Command":"rm -rf /"}`, "")},
		{Name: "pre bash command not string", Args: base, Stdin: ev("PreToolUse", "Bash", `{"command":["rm","-rf"]}`, "")},
		{Name: "pre tool not covered", Args: base, Stdin: ev("PreToolUse", "WebFetch", `{"url":"http://x"}`, "")},
		{Name: "pre mcp covered", Args: base, Stdin: ev("PreToolUse", "mcp__srv__do", `{"a":1}`, "")},
		{Name: "pre mcp prefix trick", Args: base, Stdin: ev("PreToolUse", "mcp__srvx__do", `{"a":1}`, "")},
		{Name: "pre write into git", Args: base, Stdin: ev("PreToolUse", "Write", `{"file_path":"/workspace/.git/config","content":"x"}`, "")},
		{Name: "pre write outside", Args: base, Stdin: ev("PreToolUse", "Write", `{"file_path":"/etc/passwd","content":"x"}`, ""),
			Env: []string{"AGORA_WORKSPACE=/workspace"}},
		{Name: "duplicate top-level tool_name", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_name":"WebFetch","tool_use_id":"t1","tool_input":{}}`},
		{Name: "escaped top-level key", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_n\u0061me":"Read","tool_use_id":"t1","tool_input":{}}`},
		{Name: "case-folded top-level key", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":"Read","Tool_name":"WebFetch","tool_use_id":"t1","tool_input":{}}`},
		{Name: "tool_name not string", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":7,"tool_use_id":"t1","tool_input":{}}`},
		{Name: "tool_input array", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"t1","tool_input":[1]}`},
		{Name: "tool_input missing", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"t1"}`},
		{Name: "event unknown", Args: base, Stdin: ev("Stop", "Read", `{}`, "")},
		{Name: "invalid utf8", Args: base, Stdin: "{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Re\xffad\",\"tool_use_id\":\"t1\",\"tool_input\":{}}"},
		{Name: "two objects", Args: base, Stdin: ev("PreToolUse", "Read", `{}`, "") + ev("PreToolUse", "WebFetch", `{}`, "")},
		{Name: "empty stdin", Args: base, Stdin: ""},
		{Name: "deep nesting", Args: base, Stdin: ev("PreToolUse", "Read", strings.Repeat(`{"a":`, 2000)+"1"+strings.Repeat("}", 2000), "")},
		{Name: "call id hostile", Args: base, Stdin: `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"../../x\n y","tool_input":{}}`},
		{Name: "duration negative", Args: base, Stdin: ev("PostToolUse", "Read", `{}`, `,"duration_ms":-1`)},
		{Name: "duration huge", Args: base, Stdin: ev("PostToolUse", "Read", `{}`, `,"duration_ms":1e300`)},
		{Name: "duration fractional", Args: base, Stdin: ev("PostToolUse", "Read", `{}`, `,"duration_ms":12.9`)},
		{Name: "post failure interrupted", Args: base, Stdin: ev("PostToolUseFailure", "Read", `{}`, `,"is_interrupt":true,"duration_ms":5`)},
		{Name: "is_interrupt string", Args: base, Stdin: ev("PostToolUseFailure", "Read", `{}`, `,"is_interrupt":"yes"`)},
		{Name: "over the input cap", Args: base, Stdin: huge},
		{Name: "large but under the cap", Args: base, Stdin: bigOK},
		{Name: "relay refuses pre", Args: base, Stdin: ev("PreToolUse", "Read", `{}`, ""), Relay: "refuse"},
		{Name: "relay refuses post", Args: base, Stdin: ev("PostToolUse", "Read", `{}`, ""), Relay: "refuse"},
		{Name: "secret masked", Args: append(append([]string{}, base...), "--secret-env=RT_TOKEN"),
			Stdin: ev("PreToolUse", "Read", `{"file_path":"/workspace/s3cr3tvalue"}`, ""), Env: []string{"RT_TOKEN=s3cr3tvalue"}},
		{Name: "secret variable missing", Args: append(append([]string{}, base...), "--secret-env=RT_ABSENT"),
			Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "LD_PRELOAD set", Args: base, Stdin: ev("PreToolUse", "Read", `{}`, ""), Env: []string{"LD_PRELOAD=/tmp/x.so"}},
		{Name: "LD_AUDIT empty", Args: base, Stdin: ev("PreToolUse", "Read", `{}`, ""), Env: []string{"LD_AUDIT="}},
		{Name: "no gateway", Args: []string{"--tool=Read"}, Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "relative gateway", Args: []string{"--gateway=sock", "--tool=Read"}, Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "unknown flag", Args: append(append([]string{}, base...), "--allow-all"), Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "stray argument", Args: append(append([]string{}, base...), "dispatch"), Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "approve flag not json", Args: append(append([]string{}, base...), "--approve=tool:Bash"), Stdin: ev("PreToolUse", "Read", `{}`, "")},
		{Name: "approval denied", Args: append(append([]string{}, base...), `--approve={"command":"git *"}`),
			Stdin: ev("PreToolUse", "Bash", `{"command":"git status"}`, ""), Relay: "deny"},
		{Name: "gateway down", Args: []string{"--gateway=@agora-rt28w-nobody-listens", "--tool=Read"}, Stdin: ev("PreToolUse", "Read", `{}`, "")},
	}
}

// relay is the hook relay's wire end: it records every request's path and body.
type relay struct {
	mu   sync.Mutex
	got  []string
	mode string
}

func (r *relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, req.URL.Path+" "+string(b))
	mode := r.mode
	r.mu.Unlock()
	switch {
	case req.URL.Path == "/approval" && mode == "deny":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"decision":"denied","reason":"not today","actor":"alice","args_digest":"sha256:00"}`)
	case mode == "refuse":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"tool audit: call_id already reported"}`)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// runHook runs argv (the program and its words up to "hook") for c against a fresh relay.
func runHook(t *testing.T, argv []string, env []string, c hookCase) hookResult {
	t.Helper()
	var nb [8]byte
	rand.Read(nb[:])
	name := "@agora-rt28w-" + hex.EncodeToString(nb[:])
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	rl := &relay{mode: c.Relay}
	srv := &http.Server{Handler: rl}
	go srv.Serve(ln)
	defer srv.Close()
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.Replace(a, "GW", name, 1)
	}
	cmd := exec.Command(argv[0], append(append(argv[1:], "worker", "hook"), args...)...)
	cmd.Env = append(append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, env...), c.Env...)
	cmd.Stdin = strings.NewReader(c.Stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", c.Name, err)
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	reports := append([]string{}, rl.got...)
	return hookResult{Exit: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stripGateway(stderr.String(), name), Reports: reports}
}

// stripGateway takes the relay's random name out of what the hook printed, and the dynamic
// loader's own complaint about LD_PRELOAD (a cgo-linked build prints it, the static worker
// does not; it is not the hook's output).
func stripGateway(s, name string) string {
	var keep []string
	for _, l := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(l, "ERROR: ld.so: ") {
			keep = append(keep, l)
		}
	}
	return strings.ReplaceAll(strings.Join(keep, ""), name, "@RELAY")
}

// canonicalArgsHash are the cases whose args_hash differs from 99408dd's by design: since
// 071ca52 a call's input is hashed as RFC 8785 canonical JSON (claude gives its hook a tool's
// input in its own schema's key order, not the order it printed), so each is now the sha256 of
// the canonical input, checked by hand: {"command":"rm -rf /"},
// {"content":"x","file_path":"/workspace/.git/config"}, {"content":"x","file_path":"/etc/passwd"}.
// Everything else of these cases (exit, stderr, the rest of each report) still matches 99408dd.
var canonicalArgsHash = map[string]struct{ was, now string }{
	"pre bash command escaped key": {"sha256:e672583e517ddbde9e1c308dfcf7d04b7f129ee8e0f5006a3923948df8cef6cd", "sha256:2f3b94579f43fb59e8df8ecf8d8a231a288b641d262c4c425043c107e8e72b82"},
	"pre write into git":           {"sha256:8d18550ee9382b16b1fe5bf90fd63918e8c05f41d802ce5efda6929d21eca55f", "sha256:81b6b8c8bb26aeca2e57c7eec27ff87c96faf7041a7439ec3b1c4de97fe8d482"},
	"pre write outside":            {"sha256:51a6ecd2e1a7027aec699d2bc0d90400ae6d84740ed5bbfec50c795fd689b6ba", "sha256:44bec94b6459a139bf44363cd654e18c9ea662fc9f16a770eba2bc4ddecf40c1"},
}

func TestRedTeam28W_HookSameAsPre28(t *testing.T) {
	if _, err := os.Stat("/etc/ld.so.preload"); err == nil {
		t.Skip("SKIP: this host has /etc/ld.so.preload, which every hook refuses before reading its input")
	}
	cases := hookCases()
	if *updateOld != "" {
		golden := map[string]hookResult{}
		for _, c := range cases {
			golden[c.Name] = runHook(t, []string{*updateOld}, nil, c)
		}
		b, err := json.MarshalIndent(golden, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenHook), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenHook, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(goldenHook)
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]hookResult
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		want, ok := golden[c.Name]
		if !ok {
			t.Errorf("%s: not in %s; rewrite it with -update-old", c.Name, goldenHook)
			continue
		}
		if h, ok := canonicalArgsHash[c.Name]; ok {
			for i, r := range want.Reports {
				want.Reports[i] = strings.ReplaceAll(r, h.was, h.now)
			}
		}
		argv, env := []string{self}, []string{beWorker + "=1"}
		if *slimWorker != "" {
			argv, env = []string{*slimWorker}, nil
		}
		got := runHook(t, argv, env, c)
		if got.Exit != want.Exit || got.Stdout != want.Stdout || got.Stderr != want.Stderr || strings.Join(got.Reports, "\n") != strings.Join(want.Reports, "\n") {
			t.Errorf("%s: the slim hook differs from 99408dd's:\n got  exit %d stdout %q stderr %q reports %q\n want exit %d stdout %q stderr %q reports %q",
				c.Name, got.Exit, got.Stdout, got.Stderr, got.Reports, want.Exit, want.Stdout, want.Stderr, want.Reports)
		}
		if got.Stdout != "" {
			t.Errorf("%s: the hook wrote %q to stdout, which claude reads as a decision", c.Name, got.Stdout)
		}
	}
}
