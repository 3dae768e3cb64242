package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// redteam47sSignals is a setup script that, as the first process of the sandbox after the
// worker (the worker's drop of its signals goes on beside verify, and steps waits for it
// after verify), sends PID 1 every signal it may catch, KILL and STOP included, by kill and,
// where procps is there, TERM and USR1 by sigqueue and STKFLT. Failures to send are recorded.
const redteam47sSignals = `for s in HUP INT QUIT ILL TRAP ABRT USR1 USR2 PIPE ALRM TERM CHLD CONT TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS STOP KILL; do kill -s $s 1 2>/dev/null || echo $s >> /tmp/setup-errors; done
if [ -x /usr/bin/kill ]; then /usr/bin/kill -s STKFLT 1 && /usr/bin/kill -q 7 -s TERM 1 && /usr/bin/kill -q 7 -s USR1 1 || echo procps >> /tmp/setup-errors; fi
echo setup-survived > /tmp/setup-mark
`

// TestRedteam47s_SetupScriptSignalsTheWorkerFirst: attack on the signal drop's timing. The setup script is
// the first process in the sandbox after the worker, so it is the one that could find the
// signals not yet dropped if the wait were misplaced or skipped. It signals PID 1 with
// everything at once; then the agent reports what the setup saw and makes a change. Cold and
// in a warm slot (a worker started ahead and released by its claim). Impact if it worked: the
// worker ended (or stopped) by the setup script, the dispatch failed or hung. Each dispatch
// finishes with the agent's change and the setup's mark, no signal unsent.
func TestRedteam47s_SetupScriptSignalsTheWorkerFirst(t *testing.T) {
	check := func(t *testing.T, e *env, r *dispatch.Record) {
		t.Helper()
		if r.State != lifecycle.DispatchFinished || r.Result == nil || r.Result.Patch == nil {
			t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
		}
		p := e.patch(r)
		t.Logf("%s (%s): patch\n%s", r.ID, r.Isolation, p)
		if !strings.Contains(p, "+setup-survived") || !strings.Contains(p, "+agent-survived") {
			t.Errorf("the patch lacks the setup's mark or the agent's change:\n%s", p)
		}
		if strings.Contains(p, "errors.txt") {
			t.Errorf("the setup script could not send a signal, so it was not tried:\n%s", p)
		}
	}
	agent := `cp /tmp/setup-mark mark.txt; if [ -e /tmp/setup-errors ]; then cp /tmp/setup-errors errors.txt; fi
echo agent-survived > change.txt`
	t.Run("cold", func(t *testing.T) {
		e := newEnv(t)
		e.capability("early", "commands: [\"sh -c *\"]\nsetup: setup.sh\n", map[string]string{"setup.sh": redteam47sSignals})
		if err := e.subagentWith("early-signaller", agent, "early"); err != nil {
			t.Fatal(err)
		}
		check(t, e, e.run(dispatch.Request{Subagent: "early-signaller", Timeout: 30 * time.Second}))
	})
	t.Run("warm", func(t *testing.T) {
		e, w := warmEnv(t, 1)
		e.capability("early", "commands: [\"sh -c *\"]\nsetup: setup.sh\n", map[string]string{"setup.sh": redteam47sSignals})
		if err := e.subagentWith("early-signaller", agent, "early"); err != nil {
			t.Fatal(err)
		}
		// The first dispatch of a shape starts cold and teaches the pool; the next claims a slot.
		check(t, e, e.run(dispatch.Request{Subagent: "early-signaller", Timeout: 30 * time.Second}))
		waitWarmReady(t, w, 1)
		check(t, e, e.run(dispatch.Request{Subagent: "early-signaller", Timeout: 30 * time.Second}))
		if c := warmCounts(w); c.Claimed != 1 {
			t.Fatalf("warm counts %+v: want the second dispatch to claim the slot", c)
		}
	})
}
