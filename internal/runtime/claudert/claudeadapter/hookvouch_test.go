package claudeadapter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestRedTeam31_HookVouch (learn): the relay relays a would_deny only for a call
// claude printed, with its tool and argument hash, once, and with the command line made
// from the printed input (never the report's). Failed before (through the real claude, see
// dispatch's TestRedTeam31_HookRelayForgedWouldDeny): any report was relayed as the hook's.
func TestRedTeam31_HookVouch(t *testing.T) {
	defer func(w time.Duration) { vouchWait = w }(vouchWait)
	vouchWait = 50 * time.Millisecond
	red := redact.New(nil)
	in := json.RawMessage(`{"command":"echo learned","description":"x"}`)
	p := newPrintedCalls(red)
	p.saw("toolu_1", "Bash", agentrun.ArgsHash(red, in), in)
	rep := func(tool, hash, id string) hookReport {
		return hookReport{Tool: tool, Decision: agentrun.DecisionWouldDeny, ArgsHash: hash, Phase: agentrun.PhasePre, CallID: id, Command: "forged-tool --all"}
	}
	for name, r := range map[string]hookReport{
		"never printed":  rep("Bash", agentrun.ArgsHash(red, in), "toolu_forged"),
		"another tool":   rep("Write", agentrun.ArgsHash(red, in), "toolu_1"),
		"another hash":   rep("Bash", "sha256:"+strings.Repeat("a", 64), "toolu_1"),
		"nil vouches no": rep("Bash", agentrun.ArgsHash(red, in), "toolu_1"),
	} {
		v := p
		if name == "nil vouches no" {
			v = nil
		}
		if _, err := v.vouch(t.Context(), r); err == nil {
			t.Errorf("%s: relayed", name)
		}
	}
	got, err := p.vouch(t.Context(), rep("Bash", agentrun.ArgsHash(red, in), "toolu_1"))
	if err != nil || got.Command != "echo learned" {
		t.Errorf("the printed call's would_deny: %+v, %v; want its own command line", got, err)
	}
	if _, err := p.vouch(t.Context(), rep("Bash", agentrun.ArgsHash(red, in), "toolu_1")); err == nil {
		t.Error("a second would_deny of one call was relayed")
	}
	// A report that arrives before the worker read claude's line waits for it.
	done := make(chan error, 1)
	vouchWait = 5 * time.Second
	go func() {
		_, err := p.vouch(t.Context(), rep("Bash", agentrun.ArgsHash(red, in), "toolu_2"))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.saw("toolu_2", "Bash", agentrun.ArgsHash(red, in), in)
	if err := <-done; err != nil {
		t.Errorf("a would_deny whose call was printed while it waited: %v", err)
	}
}
