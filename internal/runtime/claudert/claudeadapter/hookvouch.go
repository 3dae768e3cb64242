package claudeadapter

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// printedCalls vouches for a learn dispatch's would_deny reports. The hook
// relay is an abstract socket any process in the sandbox may reach (hookrelay.go), and a
// would_deny is evidence `agora capability suggest` turns into a grant; the relay sends it
// on with the worker's key (reporter "hook"). So a would_deny is relayed only for a call
// claude printed (its tool and argument hash as the worker read them from claude's output),
// once per call, and with the command line the worker makes from the input claude printed,
// never the one in the report: what a process of the agent's can put on record as the hook's
// is exactly what the hook itself would have. Failed before: a Bash line's child posted a
// would_deny for a call id claude never printed, for a command nobody ran, and suggest
// proposed it.
type printedCalls struct {
	red *redact.Redactor

	mu      sync.Mutex
	calls   map[string]printedCall // guarded by mu: the first call claude printed with each id
	learned map[string]bool        // guarded by mu: call ids whose would_deny was relayed
	changed chan struct{}          // guarded by mu: closed (and replaced) when calls grows
}

type printedCall struct {
	name, hash string
	input      json.RawMessage
}

// vouchWait bounds how long a would_deny waits for claude's output to show its call: claude
// prints a call before its hooks run, but the worker reads the line on its own goroutine.
var vouchWait = 10 * time.Second

func newPrintedCalls(red *redact.Redactor) *printedCalls {
	return &printedCalls{red: red, calls: map[string]printedCall{}, learned: map[string]bool{}, changed: make(chan struct{})}
}

// saw notes a call claude printed; an id printed again keeps its first call.
func (p *printedCalls) saw(id, name, hash string, input json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.calls[id]; ok {
		return
	}
	p.calls[id] = printedCall{name: name, hash: hash, input: append(json.RawMessage(nil), input...)}
	close(p.changed)
	p.changed = make(chan struct{})
}

// lookup waits (at most vouchWait) for claude to print call id, and returns it.
func (p *printedCalls) lookup(ctx context.Context, id string) (printedCall, bool) {
	if p == nil {
		return printedCall{}, false
	}
	t := time.NewTimer(vouchWait)
	defer t.Stop()
	for {
		p.mu.Lock()
		c, ok := p.calls[id]
		ch := p.changed
		p.mu.Unlock()
		if ok {
			return c, true
		}
		select {
		case <-ch:
		case <-t.C:
			return printedCall{}, false
		case <-ctx.Done():
			return printedCall{}, false
		}
	}
}

// vouch returns rep as the worker relays it (its command made from the printed input), or
// why it is not relayed.
func (p *printedCalls) vouch(ctx context.Context, rep hookReport) (hookReport, error) {
	if p == nil {
		return rep, errors.New("tool audit: would_deny: no call claude printed to check it against")
	}
	t := time.NewTimer(vouchWait)
	defer t.Stop()
	for {
		p.mu.Lock()
		c, ok := p.calls[rep.CallID]
		ch := p.changed
		if ok {
			defer p.mu.Unlock()
			switch {
			case agentrun.AuditToolName(c.name) != rep.Tool || c.hash != rep.ArgsHash:
				return rep, errors.New("tool audit: would_deny: names another call than the one claude printed with this id")
			case p.learned[rep.CallID]:
				return rep, errors.New("tool audit: would_deny: this call's would_deny is on record already")
			}
			p.learned[rep.CallID] = true
			rep.Command = learnCommand(p.red, hookInput{Tool: c.name, Input: c.input})
			return rep, nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return rep, errors.New("tool audit: would_deny: claude printed no call with this id")
		case <-ctx.Done():
			return rep, errors.New("tool audit: would_deny: claude printed no call with this id")
		}
	}
}
