package grant_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

func TestParseCommandPattern_Errors(t *testing.T) {
	tests := []struct {
		pattern, want string
	}{
		{"", "empty command pattern"},
		{"   \t ", "empty command pattern"},
		{"**", `command pattern "**": the program must be named`},
		{"go ** test", `command pattern "go ** test": ** may only be the last word`},
		{"go ** **", `** may only be the last word`},
		{"*", `command pattern "*": the program must be named, not *`},
		{"* x", `the program must be named, not *`},
		{"go [a-", `command pattern "go [a-": bad glob "[a-"`},
		{"go x\\", `bad glob "x\\"`},
		{"[ x", `bad glob "["`},
		{strings.Repeat("a ", 65), "command pattern has more than 64 words"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			_, err := grant.ParseCommandPattern(tt.pattern)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseCommandPattern(%q) = %v, want an error containing %q", tt.pattern, err, tt.want)
			}
		})
	}
	if _, err := grant.ParseCommandPattern(strings.Repeat("a ", 64)); err != nil {
		t.Errorf("64 words refused: %v", err)
	}
}

func TestCommandPattern_Match(t *testing.T) {
	tests := []struct {
		pattern string
		argv    []string
		want    bool
	}{
		{"git status", []string{"git", "status"}, true},
		{"git status", []string{"git", "status", "-s"}, false},
		{"git status", []string{"git"}, false},
		{"git status", []string{"git", "stash"}, false},
		{"git status", nil, false},
		{"  git   status ", []string{"git", "status"}, true},
		{"make *", []string{"make", "test"}, true},
		{"make *", []string{"make", "a/b"}, true}, // a lone * is any one argument
		{"make *", []string{"make", ""}, true},
		{"make *", []string{"make"}, false},
		{"make *", []string{"make", "a", "b"}, false},
		{"cat *.go", []string{"cat", "main.go"}, true},
		{"cat *.go", []string{"cat", "dir/main.go"}, false}, // a glob * does not cross /
		{"cat *.go", []string{"cat", "main.rs"}, false},
		{"cat file?.txt", []string{"cat", "file1.txt"}, true},
		{"cat file[0-9].txt", []string{"cat", "filex.txt"}, false},
		{"go test **", []string{"go", "test"}, true},
		{"go test **", []string{"go", "test", "./...", "-run", "X"}, true},
		{"go test **", []string{"go"}, false},
		{"go test **", []string{"go", "vet", "./..."}, false},
		{"sh -c *", []string{"sh", "-c", "rm -rf /"}, true},
		{"sh -c *", []string{"sh", "-c", "a", "b"}, false},
		{"python*", []string{"python3"}, true},
		{"python*", []string{"/usr/bin/python3"}, false},
	}
	for _, tt := range tests {
		p, err := grant.ParseCommandPattern(tt.pattern)
		if err != nil {
			t.Fatalf("ParseCommandPattern(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.argv); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.argv, got, tt.want)
		}
	}
}

func TestCommandAllowed(t *testing.T) {
	patterns := []string{"go [bad", "git status", "go test **"}
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"git", "status"}, true},
		{[]string{"go", "test", "-v"}, true},
		{[]string{"go", "[bad"}, false}, // an invalid pattern allows nothing
		{[]string{"rm", "-rf", "/"}, false},
	}
	for _, tt := range tests {
		if got := grant.CommandAllowed(patterns, tt.argv); got != tt.want {
			t.Errorf("CommandAllowed(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
	if grant.CommandAllowed(nil, []string{"git", "status"}) {
		t.Errorf("no patterns allowed a command")
	}
}

// Claude Code's Bash lines: a line runs only when it is one simple
// command the grant names, or the grant names a shell to run any line.
func TestCommandLineAllowed(t *testing.T) {
	tests := []struct {
		patterns []string
		line     string
		want     bool
		why      string
	}{
		{[]string{"git status"}, "git status", true, ""},
		{[]string{"git status"}, "  git   'status' ", true, ""},
		{[]string{"git status"}, `git "status"`, true, ""},
		{[]string{"git status"}, "cat PRIVATE.txt", false, `command ["cat" "PRIVATE.txt"] is not covered by this subagent's grant; the grant allows "git status"`},
		{[]string{"git status"}, "git log -1", false, "not covered"},
		{[]string{"git status"}, "git status -s", false, "not covered"},
		{[]string{"git status"}, "git status && cat PRIVATE.txt", false, "not one simple command: the operator '&'"},
		{[]string{"git status"}, "git status; id", false, "the grant names no shell"},
		{[]string{"git status"}, "git status $(id)", false, "expansion"},
		{[]string{"git status"}, "git status > out", false, "redirection"},
		{[]string{"git status"}, "GIT_DIR=x git status", false, "assignment"},
		{[]string{"git status"}, "time git status", false, "reserved word"},
		{[]string{"git status"}, "", false, "empty"},
		{[]string{"git status"}, "git status\nid", false, "newline"},
		{nil, "ls", false, "no commands are granted"},
		{[]string{"go test **"}, "go test ./... -run 'TestX$'", true, ""},
		{[]string{"bash -c *"}, "git status && cat x | wc -l", true, ""},
		{[]string{"bash -lc *"}, "for f in *; do echo $f; done", true, ""},
		{[]string{"sh -c *"}, "a; b", true, ""},
		{[]string{"sh -c *"}, "ls", true, ""},
		{[]string{"sh -c ls"}, "a; b", false, "names no shell"},
	}
	for _, tt := range tests {
		ok, why := grant.CommandLineAllowed(tt.patterns, tt.line)
		if ok != tt.want || !strings.Contains(why, tt.why) || (ok && why != "") {
			t.Errorf("CommandLineAllowed(%q, %q) = %v %q, want %v %q", tt.patterns, tt.line, ok, why, tt.want, tt.why)
		}
	}
}

func TestCommandPattern_RunsAnyLine(t *testing.T) {
	for pattern, want := range map[string]bool{
		"bash -c *": true, "bash -lc *": true, "sh -c *": true, "sh -c **": true, "bash -lc * **": true,
		"sh -c": false, "sh -c git*": false, "zsh -c *": false, "bash -xc *": false, "sh -c * x": false,
		"/bin/sh -c *": false, "git status": false, "bash **": true, "b* -c *": true, "sh ?c *": true, "sh -c ?": false,
	} {
		p, err := grant.ParseCommandPattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.RunsAnyLine(); got != want {
			t.Errorf("%q.RunsAnyLine() = %v, want %v", pattern, got, want)
		}
		// Whatever it says, CommandLineAllowed agrees on a line that is not one simple command.
		if ok, _ := grant.CommandLineAllowed([]string{pattern}, "a; b /c"); ok != want {
			t.Errorf("CommandLineAllowed(%q, a line with ;) = %v, want %v", pattern, ok, want)
		}
	}
}
