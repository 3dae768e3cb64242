package cli_test

import (
	"strings"
	"testing"
)

// TestLists_HaveHeaders: every table-like list names its columns off a
// terminal too (make demo, a pipe to less), as its first line, tab-separated like the rows;
// -o json is unchanged (TestAuditLog and the JSON goldens pin it).
func TestLists_HaveHeaders(t *testing.T) {
	env := auditHome(t, "")
	for _, tt := range []struct {
		args   []string
		header string
	}{
		{[]string{"capability", "list"}, "NAME\t"},
		{[]string{"capability", "history", "repo-tools"}, "WHEN\tACTION\tDIGEST\tACTOR"},
		{[]string{"audit", "log"}, "SEQ\tTIME\tACTOR\tKIND\tSUBJECT"},
		{[]string{"doctor"}, "CHECK\tSTATUS\tDETAIL\tFIX"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runAgora(t, env, tt.args...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[0], tt.header) {
				t.Errorf("agora %s printed %q (exit %d, %s); want its header %q first, then rows", strings.Join(tt.args, " "), r.stdout, r.code, r.stderr, tt.header)
			}
		})
	}
}
