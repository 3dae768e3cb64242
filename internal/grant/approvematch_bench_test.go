package grant

import "testing"

// approveBenchRules are a capability's approve rules as docs/runtimes.md writes them, with a
// few more command rules.
var approveBenchRules = []ApproveRule{{Tool: "write_file"}, {Command: "git push *"},
	{Command: "npm publish"}, {Command: "kubectl delete *"}, {Command: "rm -rf *"}}

var approveBenchCalls = [][]string{
	{"git", "status"},
	{"go", "test", "./...", "-run", "TestX"},
	{"git", "-c", "user.name=x", "commit", "-m", "a message"},
	{"env", "LANG=C", "nice", "git", "log", "--oneline", "-20"},
}

// BenchmarkNeedsApproval is the cost of judging a run_command call against the rules: every
// call the openai tool view, the Claude hook and the gateway see goes through it.
func BenchmarkNeedsApproval(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, argv := range approveBenchCalls {
			NeedsApproval(approveBenchRules, "run_command", argv)
		}
	}
}

// BenchmarkNeedsApproval_PositionalBaseline is the matcher rules had before:
// each command rule matched word by word as a grant pattern, which let pushes through.
func BenchmarkNeedsApproval_PositionalBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, argv := range approveBenchCalls {
			for _, r := range approveBenchRules {
				if r.Command == "" {
					continue
				}
				if p, err := ParseCommandPattern(r.Command); err == nil && p.Match(argv) {
					break
				}
			}
		}
	}
}
