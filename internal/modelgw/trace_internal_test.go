package modelgw

import (
	"context"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/secret/redact"
)

type ctxKey struct{}

// phaseTracer is a Tracer whose current phase the test moves on, and which keeps the parent
// each span was given.
type phaseTracer struct {
	current context.Context
	parents []context.Context
}

func (p *phaseTracer) Span(parent context.Context, _ string, _, _ time.Time, _ string, _ ...any) context.Context {
	p.parents = append(p.parents, parent)
	return context.Background()
}

func (p *phaseTracer) Current() context.Context { return p.current }

// TestSpans_ModelCallUnderThePhaseItStartedIn: a model call's span is recorded when the call
// ends, by when the dispatch may have left the agent phase (the agent exits as soon as its
// last answer arrives, so the last chat span can fall under the capture phase). Its parent
// is the phase it started in.
func TestSpans_ModelCallUnderThePhaseItStartedIn(t *testing.T) {
	agent := context.WithValue(context.Background(), ctxKey{}, "agent")
	pt := &phaseTracer{current: agent}
	s := newSpans(pt)
	ex := &exchange{route: routeModelChat, decision: decisionAllowed, spanParent: s.parent()}
	pt.current = context.WithValue(context.Background(), ctxKey{}, "capture") // the agent exited
	s.request(&Gateway{red: redact.New(nil)}, ex, 200, time.Now())
	if len(pt.parents) != 1 || pt.parents[0] == nil || pt.parents[0].Value(ctxKey{}) != "agent" {
		t.Fatalf("the model call's span parents %v, want the agent phase it started in", pt.parents)
	}
}
