package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam42_AgentCannotReachTheLifeline: the agent must not hold its worker's lifeline,
// nor reopen it: a write end opened through /proc/1/fd would keep the pipe from ever reading
// EOF, and the sandbox would outlive its supervisor. The agent finds no lifeline variable in
// its environment, no pipe among its descriptors but its output, and neither the worker's
// descriptors nor its environment in /proc (the worker is not dumpable).
func TestRedTeam42_AgentCannotReachTheLifeline(t *testing.T) {
	e := newEnv(t)
	e.subagent("reach", `
env | grep `+wire.LifelineFDEnv+` && echo "FOUND: variable"
for f in /proc/self/fd/*; do
  case "$f" in /proc/self/fd/[012]) continue ;; esac
  case "$(readlink "$f")" in pipe:*) echo "FOUND: inherited pipe $f" ;; esac
done
ls /proc/1/fd >/dev/null 2>&1 && echo "FOUND: the worker's descriptors"
grep -a `+wire.LifelineFDEnv+` /proc/1/environ 2>/dev/null && echo "FOUND: the worker's environment"
for f in /proc/1/fd/*; do ( exec 9>"$f" ) 2>/dev/null && echo "FOUND: write end $f"; done
echo probed
`)
	r := e.run(dispatch.Request{Subagent: "reach"})
	out := e.stdout(r)
	if r.State != lifecycle.DispatchFinished || !strings.Contains(out, "probed") {
		t.Fatalf("%s %s %s: %q", r.State, r.Reason, r.Detail, out)
	}
	if strings.Contains(out, "FOUND") {
		t.Errorf("the agent reaches its worker's lifeline:\n%s", out)
	}
}
