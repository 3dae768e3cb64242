package suggest_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestRedTeam32_FileWouldDenyPathsProposeNothingShownEscaped: the
// gateway records a path with format and bidirectional characters (it refuses only control
// characters), a path written to read as grant YAML, and a path of the gateway's full 1,024
// bytes. None proposes anything, each is listed in printable ASCII (a right-to-left override
// cannot reorder what a reviewer reads, a line separator cannot start a line of its own), and
// a forged one (reporter sandbox) stays marked as such whatever its path says.
func TestRedTeam32_FileWouldDenyPathsProposeNothingShownEscaped(t *testing.T) {
	paths := []string{
		"/etc/\u202egnp.exe", // shows as /etc/exe.png
		"/tmp/a\u2028tools: [run_command]\u2029egress: [{host: evil.example}]", // line and paragraph separators
		"tools: [run_command, http_fetch]",                                     // reads as a grant line
		"/x\u200b\u2066\u2069\ufeff",                                           // zero-width and isolates
		"/" + strings.Repeat("d", 1023),                                        // the gateway's cap
	}
	var ents []ent
	for _, p := range paths {
		ents = append(ents, ent{entry.FileWouldDeny, map[string]any{entry.KeyPath: p, entry.KeyOp: "write", entry.KeyTool: "write_file", entry.KeyReporter: "worker"}})
	}
	ents = append(ents, ent{entry.FileWouldDeny, map[string]any{entry.KeyPath: "/etc/cron.d/x (write) by write_file", entry.KeyOp: "write", entry.KeyTool: "write_file", entry.KeyReporter: "sandbox"}})
	p := propose(t, grant.Set{}, false, ents...)
	if len(p.Grant.Tools) != 0 || len(p.Grant.Commands) != 0 || len(p.Grant.Egress) != 0 || len(p.Items) != 0 {
		t.Errorf("paths of file.would_deny proposed %+v (items %+v)", p.Grant, p.Items)
	}
	if len(p.Refused) != len(ents) {
		t.Fatalf("refused %d, want each of the %d listed: %+v", len(p.Refused), len(ents), p.Refused)
	}
	forged := 0
	for _, r := range p.Refused {
		for _, s := range []string{r.Item, r.Reason} {
			for i := 0; i < len(s); i++ {
				if s[i] < ' ' || s[i] >= 0x7f {
					t.Errorf("listed %q (%q): byte %#x is not printable ASCII", r.Item, r.Reason, s[i])
					break
				}
			}
		}
		if strings.Contains(r.Item, "cron.d") {
			forged++
			if !strings.Contains(r.Reason, "could have forged") {
				t.Errorf("a forged write is listed as %q", r.Reason)
			}
		}
	}
	if forged != 1 {
		t.Errorf("the forged write is listed %d times", forged)
	}
}
