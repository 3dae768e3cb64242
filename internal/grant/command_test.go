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
