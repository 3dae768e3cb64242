package grant

import (
	"strings"
	"testing"
)

func TestApproveNotes(t *testing.T) {
	docs := Set{Tools: []string{"read_file", "write_file", "run_command"}, Commands: []string{"git **"},
		Approve: []ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}}
	tests := []struct {
		name string
		set  Set
		want []string // substrings, one note each, in order
	}{
		{"docs capability", docs, []string{
			"rule write_file holds write_file calls only",
			`rule "git push *": a repository on this file system can be changed without a push`,
			`command "git **": git runs hooks and commands named in configuration files`,
		}},
		{"no rules", Set{Commands: []string{"make *"}}, nil},
		{"what rules and patterns cannot see", Set{Tools: []string{"run_command"},
			Commands: []string{"make *", "npm run **", "python3 **", "sh -c *", "awk **", "./build.sh", "python*", "ls **"},
			Approve:  []ApproveRule{{Command: "git push -f origin *"}, {Command: "rm *.go"}}}, []string{
			`rule "git push -f origin *": a repository on this file system can be changed without a push`,
			`option "-f" is held only as written`,
			`"origin" is held only when the call names it`,
			`rule "rm *.go": "*.go" is matched against argument text`,
			`command "make *": agora does not read what make runs`,
			`command "npm run **": agora does not read what npm runs`,
			`command "python3 **": a script file python3 runs is not seen`,
			`command "sh -c *": a script file sh runs is not seen`,
			`command "awk **": every call of awk is held by every command rule`,
			`command "./build.sh" runs a program from the workspace`,
			`command "python*": its program is a pattern`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ApproveNotes(tt.set)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d notes, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("note %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
