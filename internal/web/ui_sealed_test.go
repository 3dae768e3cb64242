package web_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestUI_SealedRunOffersNoActions: in real Chromium, an open run's page
// offers Cancel (and no Retry: nothing failed); once the run is cancelled elsewhere and
// sealed, the page left open answers its Cancel button with a JSON error that says
// "conflict:" once (it was the plain text "conflict: conflict: ..."), and a reload offers
// neither Cancel nor Retry, on the run or its tasks.
func TestUI_SealedRunOffersNoActions(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)
	b.login(uiOperatorToken)
	count := func(sel string) int { return b.must(map[string]any{"op": "count", "selector": sel}).N }

	run := e.submit("held", "version: 1\nname: held\ntasks:\n  - {id: wait, subagent: forever}\n  - {id: after, subagent: slow, depends_on: [wait]}\n")
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID + "/tasks/wait"})
	if n := count("#cancel-task"); n != 1 {
		t.Errorf("an open run's pending or running task offers %d Cancel task buttons, want 1", n)
	}
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	if c, r := count("#cancel-run"), count("#retry-run"); c != 1 || r != 0 {
		t.Errorf("an open run with nothing failed offers %d Cancel and %d Retry buttons, want 1 and 0", c, r)
	}

	e.run("orch", "cancel", run.ID) // elsewhere, while the page stays open
	agoratest.Eventually(t, 30*time.Second, "run "+run.ID+" sealed after its cancel", func() error {
		if r := mustStatus(t, e, run.ID); !r.Sealed {
			return fmt.Errorf("%s, not sealed", r.State)
		}
		return nil
	})
	b.must(map[string]any{"op": "click", "selector": "#cancel-run", "nav": true})
	body := txt(b, "body")
	var got api.Error
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &got); err != nil || got.Code != "conflict" ||
		strings.Count(got.Error, "conflict") != 1 || !strings.HasPrefix(got.Error, "conflict: ") || !strings.Contains(got.Error, "sealed") {
		t.Errorf("the stale page's Cancel answered %q (%v); want a JSON error with code conflict and one \"conflict: ...\" naming the seal", body, err)
	}
	b.shot("run-sealed-cancel-409")

	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	if c, r := count("#cancel-run"), count("#retry-run"); c != 0 || r != 0 {
		t.Errorf("a sealed run offers %d Cancel and %d Retry buttons, want none", c, r)
	}
	b.shot("run-sealed")
	for _, task := range []string{"wait", "after"} {
		b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID + "/tasks/" + task})
		if n := count("#cancel-task"); n != 0 {
			t.Errorf("task %s of a sealed run offers Cancel task", task)
		}
	}
}
