package toolreg

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

// learnRecorder is a LearnAuditor; fail makes WouldDeny fail.
type learnRecorder struct {
	recorder
	would []Decision
	fail  bool
}

func (l *learnRecorder) WouldDeny(_ context.Context, d Decision) error {
	if l.fail {
		return errors.New("gateway down")
	}
	l.would = append(l.would, d)
	return nil
}

// TestView_Learn: a learn view offers every registered tool; a call its grant would
// refuse is reported as would_deny (with the command of run_command, masked) before it runs,
// and runs with Call.Learn; a granted call is not reported. The attacks: a would_deny that is
// not on record does not run, and a learn view whose auditor cannot record would_deny refuses
// (fail closed). Failed before: WithLearn did not exist.
func TestView_Learn(t *testing.T) {
	r := NewRegistry()
	var learned []bool
	for _, n := range []string{"read_file", commandTool} {
		mustRegister(t, r, Tool{Name: n, Description: "t", Schema: echoSchema, Handler: func(_ context.Context, c Call) (Result, error) {
			learned = append(learned, c.Learn)
			return Result{Content: "ran"}, nil
		}})
	}
	g := grant.Set{Tools: []string{"read_file"}, Commands: []string{"git status"}}
	redact := func(b []byte) []byte { return []byte(string(b)) }
	a := &learnRecorder{}
	v := r.For("d1", testRole, g, a, WithLearn(), WithRedactor(redact))
	if len(v.List()) != 2 {
		t.Fatalf("a learn view lists %v, want every registered tool", v.List())
	}
	if _, err := v.Call(t.Context(), "read_file", json.RawMessage(`{"path":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Call(t.Context(), commandTool, json.RawMessage(`{"path":"x","argv":["rm","-rf"]}`)); err != nil {
		t.Fatal(err)
	}
	if len(a.would) != 1 || a.would[0].Tool != commandTool || a.would[0].Command != "rm -rf" ||
		a.would[0].Reason != ReasonNotGranted+"; "+ReasonCommandNotGranted || a.would[0].Decision != DecisionWouldDeny {
		t.Errorf("would_deny reports = %+v", a.would)
	}
	if len(learned) != 2 || learned[0] || !learned[1] {
		t.Errorf("handlers' Call.Learn = %v, want [false true]", learned)
	}
	if ds := a.all(); len(ds) != 2 || ds[1].Decision != DecisionAllowed {
		t.Errorf("decisions = %+v", ds)
	}

	// The would_deny did not reach the record: the call does not run.
	a.fail, learned = true, nil
	if _, err := v.Call(t.Context(), commandTool, json.RawMessage(`{"path":"x","argv":["rm"]}`)); err == nil || len(learned) != 0 {
		t.Fatalf("a call whose would_deny failed: err %v, ran %d times", err, len(learned))
	}
	if d := a.all(); d[len(d)-1].Decision != DecisionError || d[len(d)-1].Reason != ReasonWouldDenyNotRecorded {
		t.Errorf("last decision %+v, want error %q", d[len(d)-1], ReasonWouldDenyNotRecorded)
	}

	// An auditor that cannot record would_deny: refused.
	plain := &recorder{}
	v = r.For("d1", testRole, g, plain, WithLearn())
	var de *DeniedError
	if _, err := v.Call(t.Context(), commandTool, json.RawMessage(`{"path":"x","argv":["rm"]}`)); !errors.As(err, &de) || len(learned) != 0 {
		t.Fatalf("learn view without a LearnAuditor: err %v, ran %d", err, len(learned))
	}
	if d := plain.only(t); d.Decision != DecisionDenied {
		t.Errorf("decision %+v, want denied", d)
	}
}
