package grant

import "testing"

func TestApprovalTool(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"write_file", "write_file"},
		{"run_command", "run_command"},
		{"Write", "write_file"},
		{"MultiEdit", "write_file"},
		{"Bash", "run_command"},
		{"WebFetch", "http_fetch"},
		{"Glob", "list_files"},
		{"deploy_production", ""},
		{"mcp__github__merge", ""},
		{"TodoWrite", ""},
		{"write", ""},
		{"WRITE_FILE", ""},
		{"", ""},
	} {
		if got := ApprovalTool(tc.in); got != tc.want {
			t.Errorf("ApprovalTool(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHeldCommandLine(t *testing.T) {
	rules := []ApproveRule{{Tool: "write_file"}, {Command: "git push *"}, {Command: "make deploy"}}
	for _, tc := range []struct {
		line, want string
		held       bool
	}{
		{"git push origin", "command: git push *", true},
		{"make deploy", "command: make deploy", true},
		{"git status", "", false},
		// Shell syntax: the words need not be what runs, so the first command rule holds it.
		{"git status; git push origin", "command: git push *", true},
		{"echo $(git push origin)", "command: git push *", true},
		{"", "command: git push *", true},
		// Quotes are read as the shell reads them: the argv is judged, not the text.
		{"git 'push' origin", "command: git push *", true},
		{"git \"status\"", "", false},
		{"make\\ deploy", "command: make deploy", true}, // a program named "make deploy" names make
		{"env git push", "command: git push *", true},
		{"sh -c 'git push'", "command: git push *", true},
	} {
		r, ok := HeldCommandLine(rules, tc.line)
		if ok != tc.held || r.String() != tc.want && tc.held {
			t.Errorf("HeldCommandLine(%q) = %q %v, want %q %v", tc.line, r.String(), ok, tc.want, tc.held)
		}
	}
	if _, ok := HeldCommandLine([]ApproveRule{{Tool: "write_file"}}, "rm -rf / ; x"); ok {
		t.Error("a line with shell syntax is held although no command rule exists")
	}
}
