package mcpserver_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeMCP is what README.md tells a new user about MCP: the command lines of its `agora mcp`
// block, the number of tools it promises, whether it promises that a lead writes plans, and
// its ceiling table (ceiling -> number of tools).
type readmeMCP struct {
	lines    []string
	count    int
	plans    bool
	ceilings map[string]int
}

var numberWords = map[string]int{"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

func readREADME(t *testing.T) readmeMCP {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	doc := string(b)
	var r readmeMCP
	// The first sh block that starts `agora mcp` is the one the MCP paragraph shows.
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(block[1], "agora mcp") {
			continue
		}
		for _, l := range strings.Split(block[1], "\n") {
			if strings.Contains(l, "agora mcp") {
				r.lines = append(r.lines, l)
			}
		}
		break
	}
	m := regexp.MustCompile(`Exactly (\w+) tools`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("README.md no longer says how many MCP tools there are (\"Exactly N tools\"): keep this test in step")
	}
	n, ok := numberWords[m[1]]
	if !ok {
		t.Fatalf("README.md says %q tools: add the word to numberWords", m[1])
	}
	r.count = n
	r.plans = strings.Contains(doc, "writes plans")
	r.ceilings = map[string]int{}
	for _, row := range regexp.MustCompile("(?m)^\\| `(read|dispatch|orchestrate)`[^|]*\\| (\\d+) \\|").FindAllStringSubmatch(doc, -1) {
		r.ceilings[row[1]], _ = strconv.Atoi(row[2])
	}
	if len(r.lines) == 0 {
		t.Fatal("README.md has no `agora mcp` lines")
	}
	return r
}

// mcpArgs turns one README line into what the client would run: the environment it sets and
// the arguments of `agora mcp`. `$(openssl rand -hex 32)` becomes a fresh token.
func mcpArgs(t *testing.T, line, token string) (env, args []string) {
	t.Helper()
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	line = strings.ReplaceAll(line, "$(openssl rand -hex 32)", token)
	// The lines are words without quotes (so a reader can paste them into any shell); one
	// that grows quoting needs a shell here.
	if strings.ContainsAny(line, "'\"\\`") {
		t.Fatalf("README line %q has quoting this test does not read", line)
	}
	words := strings.Fields(line)
	if words[0] == "claude" {
		// claude mcp add NAME [--env K=V]... -- agora mcp ARGS
		i := slices.Index(words, "--")
		if i < 0 {
			t.Fatalf("README line %q: no -- before the server's command", line)
		}
		for j := 0; j < i; j++ {
			if words[j] == "--env" && j+1 < i && !strings.HasPrefix(words[j+1], "AGORA_HOME=") {
				env = append(env, words[j+1]) // the test's home stands in for the user's
			}
		}
		words = words[i+1:]
	}
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	if len(words) < 2 || words[0] != "agora" {
		t.Fatalf("README line %q does not run agora", line)
	}
	// Global flags may come before the command; they work after it as well.
	i := slices.Index(words, "mcp")
	if i < 0 {
		t.Fatalf("README line %q does not run agora mcp", line)
	}
	return env, append(words[1:i:i], words[i+1:]...)
}

// TestREADME_MCPLinesAsWritten runs every `agora mcp` line of README.md as written (its
// environment and arguments; AGORA_HOME is the test's home, a port is the free one) through
// the SDK client, and holds the README to what it promises: the number of tools, submit when
// it says a lead writes plans, and each row of its ceiling table.
func TestREADME_MCPLinesAsWritten(t *testing.T) {
	r := readREADME(t)
	home := newHome(t)
	for _, line := range r.lines {
		t.Run(strings.Fields(line)[0], func(t *testing.T) {
			token := newToken(t)
			env, args := mcpArgs(t, line, token)
			var names []string
			if i := slices.Index(args, "--http"); i >= 0 {
				args = slices.Delete(slices.Clone(args), i, i+2)
				srv := httpServer(t, home, env, args...)
				names = toolNames(t, httpSession(t, srv.url, token))
			} else {
				names = toolNames(t, stdioSessionEnv(t, home, env, args...))
			}
			if len(names) != r.count {
				t.Errorf("%q publishes %d tools %v; README.md says exactly %d", line, len(names), names, r.count)
			}
			if r.plans && !slices.Contains(names, "agora_orchestrator_submit") {
				t.Errorf("%q publishes no agora_orchestrator_submit, and README.md says a lead writes plans", line)
			}
		})
	}
	if len(r.ceilings) != 3 {
		t.Fatalf("README.md's ceiling table has rows %v; want read, dispatch and orchestrate", r.ceilings)
	}
	for c, want := range r.ceilings {
		if got := len(toolNames(t, stdioSession(t, home, "--ceiling", c))); got != want {
			t.Errorf("--ceiling %s publishes %d tools; README.md's table says %d", c, got, want)
		}
	}
}
