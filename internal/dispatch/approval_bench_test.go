package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
)

// BenchmarkApprovalPath is a held call's way through the host, end to end, with the person's
// side taken out: the worker's POST /approval to a real gateway on its Unix socket, the
// supervisor's approver recording the pending approval in agora.db with its audit entry, a
// decider approving it through Records.DecideApproval (as 'agora dispatch approve' does) the
// moment it is recorded, the approver reading the decision back, the answer, and the call's
// tool.call report. The baseline is the same call with no approve rule: its tool.call report
// alone. poll is how often the approver reads agora.db for a decision (200ms is the
// supervisor's).
func BenchmarkApprovalPath(b *testing.B) {
	e := newEnv(b)
	e.subagent("quiet", "true")
	r, err := e.d.Accept(b.Context(), dispatch.Request{Subagent: "quiet", Timeout: 30 * time.Minute, Actor: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	role := r.Subagent + "@" + string(r.SubagentDigest)
	seq := 0 // the dispatch's approvals so far: the next one is seq+1
	report := `{"tool":"write_file","decision":"allowed","reason":"granted","args_hash":"sha256:` + strings.Repeat("a", 64) + `","duration_ms":1}`
	for _, tc := range []struct {
		name string
		held bool
		poll time.Duration
	}{
		{"unheld", false, 0},
		{"held/poll=200ms", true, 200 * time.Millisecond},
		{"held/poll=5ms", true, 5 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir, err := os.MkdirTemp("", "gwb")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			sock := filepath.Join(dir, "gw.sock")
			gw, err := modelgw.Listen(context.Background(), sock, modelgw.Config{
				DispatchID: r.ID, Role: role, Dialer: egress.NewDialer(egress.Policy{}, nil),
				Audit:    dispatch.NewGatewayAuditor(e.d.Records, r.ID, role),
				Approver: dispatch.NewApprovalWaiter(e.d.Records, r.ID, role, time.Minute, tc.poll),
				Approve:  []grant.ApproveRule{{Tool: "write_file"}}, ApprovalTimeout: time.Minute,
				RequestsPerSecond: 1e9, RequestBurst: 1 << 30, MaxAuditEntries: 1 << 30, MaxAuditBytes: 1 << 40,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer gw.Close()
			c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			}}}
			post := func(path, body string) string {
				resp, err := c.Post("http://gw"+path, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					b.Fatalf("%s: %d %s", path, resp.StatusCode, out)
				}
				return string(out)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if tc.held {
					call := fmt.Sprintf("%s_%d", strings.ReplaceAll(strings.ReplaceAll(tc.name, "/", "_"), "=", "_"), i)
					seq++
					decided := make(chan error, 1)
					go func() { decided <- decide(e.d.Records, r.ID, call, seq) }()
					ans := post("/approval", `{"tool":"write_file","call_id":"`+call+`","rule":"write_file","args":{"path":"a.txt","content":"x"}}`)
					if err := <-decided; err != nil || !strings.Contains(ans, `"decision":"approved"`) {
						b.Fatalf("answer %s, decider: %v", ans, err)
					}
				}
				post("/audit/tool", report)
			}
		})
	}
}

// decide approves call, approval seq of dispatch id, as soon as it is recorded (a one-row
// read every 100µs), as 'agora dispatch approve' would: the person, at once.
func decide(records *dispatch.Records, id, call string, seq int) error {
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if _, err := records.Approval(ctx, id, seq); err != nil {
			continue
		}
		_, err := records.DecideApproval(ctx, id, call, true, "", "bench", "")
		return err
	}
	return errors.New("never pending")
}
