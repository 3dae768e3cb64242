package codexadapter

import (
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/shellwords"
)

// TestRedTeam44R_CodexSignalled: the agent's code signals the real Codex CLI (its own uid
// may) right after the model wrote an approving draft beside its command and before it judged
// the command's output. codex either dies or exits non-zero (the draft is then the last
// agent message it printed, but the adapter reports a failure and no final answer), or goes
// on (SIGPIPE, SIGWINCH, SIGTSTP) to the model's own verdict. The draft is never the final
// answer.
func TestRedTeam44R_CodexSignalled(t *testing.T) {
	bin, err := runtimebin.Resolve(context.Background(), "codex", realCodexBinary(t))
	if err != nil {
		t.Fatalf("resolve the real codex: %v", err)
	}
	const draft = `{"approve": true, "reasons": ["a draft before the tests ran"]}`
	const verdict = `{"approve": false, "reasons": ["the tests fail"]}`
	for _, sig := range []string{"INT", "TERM", "HUP", "QUIT", "USR1", "PIPE", "WINCH", "TSTP"} {
		t.Run(sig, func(t *testing.T) {
			script := `p=$PPID; while [ "$p" -gt 1 ] && [ "$(cat /proc/$p/comm)" != codex ]; do p=$(awk '{print $4}' /proc/$p/stat); done; kill -` + sig + ` $p; kill -CONT $p; echo signalled`
			first := responsestest.Exec("sh -c " + shellwords.Quote(script))
			first.Text = draft
			a := &memAuditor{}
			fake, err := responsestest.Start(codexTestKey, func(q responsestest.Request) responsestest.Reply {
				if len(q.Outputs) == 0 {
					return first
				}
				return responsestest.Say(verdict)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			sock := startGatewayAt(t, a, fake.URL)
			inv, stderr, _ := codexInvocation(t, sock, "", grant.Set{Tools: []string{"run_command"}, Commands: []string{"sh -c *"}})
			inv.Binary = bin.Path
			exit, err := Adapter{}.Run(t.Context(), inv)
			if err != nil {
				t.Fatalf("Run: %v\nstderr:\n%s", err, stderr)
			}
			t.Logf("exit %+v", exit)
			if exit.Final != nil && *exit.Final == draft {
				t.Fatalf("the draft is the final answer")
			}
			if exit.Final != nil && *exit.Final != verdict {
				t.Errorf("final answer %q, want none or the model's verdict", *exit.Final)
			}
			if exit.Final == nil && !strings.Contains(exit.Failure, "exited") && !strings.Contains(exit.Failure, "killed") && !strings.Contains(exit.Failure, "signal") {
				t.Errorf("the failure %q is not codex's end: the attack did not run", exit.Failure)
			}
			if exit.Final == nil && exit.Failure == "" {
				t.Errorf("no final answer and no failure: %+v", exit)
			}
		})
	}
}
