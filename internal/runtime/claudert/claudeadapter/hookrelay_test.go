package claudeadapter

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/google/go-cmp/cmp"
)

// TestHookRelay: the relay sends each hook report on to the gateway and remembers only
// those the gateway kept; a report that is not one phase of a call is refused unsent.
func TestHookRelay(t *testing.T) {
	a := &memAuditor{}
	gw := agentrun.DialGateway(startGateway(t, a))
	t.Cleanup(gw.Close)
	hooks, err := startHookRelay(gw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hooks.close)
	if !strings.HasPrefix(hooks.name, "@agora-hook-") {
		t.Fatalf("relay address %q is not an abstract socket", hooks.name)
	}
	c := agentrun.DialGateway(hooks.name)
	defer c.Close()
	h := "sha256:" + strings.Repeat("0", 64)
	rep := func(phase, decision, id string) error {
		return c.Report(t.Context(), agentrun.ToolReport{Tool: "Bash", Decision: decision, Reason: "r", ArgsHash: h, Phase: phase, CallID: id})
	}
	if err := rep(agentrun.PhasePre, agentrun.DecisionRequested, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := rep(agentrun.PhasePre, agentrun.DecisionRequested, "t1"); err == nil {
		t.Error("the gateway kept a second pre report of one call")
	}
	if err := rep(agentrun.PhasePost, "allowed", "t2"); err == nil {
		t.Error("a post report with no pre report was kept")
	}
	if err := rep("", "allowed", "t3"); err == nil || !strings.Contains(err.Error(), "phase: want pre or post") {
		t.Errorf("a report without a phase: got %v", err)
	}
	if err := rep(agentrun.PhasePost, "allowed", "t1"); err != nil {
		t.Fatal(err)
	}
	got, ok := hooks.record("t1")
	if !ok || got.pre == nil || got.pre.Decision != agentrun.DecisionRequested || got.post == nil || got.post.Decision != "allowed" || got.preAt.IsZero() {
		t.Errorf("record of t1: %+v", got)
	}
	for _, id := range []string{"t2", "t3"} {
		if r, ok := hooks.record(id); ok {
			t.Errorf("%s: a report the gateway did not keep is remembered: %+v", id, r)
		}
	}
	if diff := cmp.Diff([]string{"Bash requested r|pre|t1|" + h, "Bash allowed r|post|t1|" + h}, a.Calls()); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
}

// FuzzParseHookReport: whatever reaches the relay, an accepted report is one phase of a call
// with a call id the gateway accepts and a sane duration, and the error never repeats it.
func FuzzParseHookReport(f *testing.F) {
	for _, s := range []string{
		`{"tool":"Bash","decision":"requested","reason":"r","args_hash":"sha256:00","duration_ms":0,"phase":"pre","call_id":"toolu_1"}`,
		`{"tool":"Bash","decision":"allowed","phase":"post","call_id":"t","duration_ms":5}`,
		`{"phase":"pre","call_id":"a/b"}`, `{"phase":"x"}`, `{"Phase":"pre","phase":"pre"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseHookReport(b)
		if err != nil {
			if len(b) > 16 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("the error repeats the input: %v", err)
			}
			return
		}
		if (r.Phase != agentrun.PhasePre && r.Phase != agentrun.PhasePost) || r.CallID == "" || agentrun.AuditCallID(r.CallID) != r.CallID ||
			r.DurationMS < 0 || r.DurationMS > maxDurationMS || len(b) > maxHookReport {
			t.Fatalf("accepted %+v", r)
		}
	})
}
