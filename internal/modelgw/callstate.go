package modelgw

import (
	"errors"
	"sync"
)

// A call's reports must tell one story. Anything in the sandbox can POST /audit/tool, so
// without memory of what is on record a process the agent left running could follow the
// hook's "pre"/"denied" with a "post"/"allowed" of its own for the same call id, and the
// audit would show a refused call as having run. callStates remembers, per call id, what
// the gateway recorded, and admits only the reports that can follow it:
//
//	nothing on record   -> "pre" (requested or denied), or one report without a phase
//	"pre" "requested"   -> one "post" (allowed, error, or denied by claude's own rules)
//	anything else       -> nothing more
//
// So a call id has at most one "pre", a "post" comes only after a "pre" "requested" and at
// most once, and a call refused before it ran stays refused. A report without a call id
// (the openai runtime's) has no state. What the state cannot do is tell the hook's reports
// from forged ones that come first: a process that guesses a call id before claude's hook
// reports it makes the hook's report refused, which blocks the call (fail closed).
//
// Only a kept record adds an id, and every kept record is charged to the audit budget, so
// the ids held are bounded by the budget (entries, and bytes: each id is part of its
// entry); at most [Config.MaxConcurrent] more are held while their records are written.

// callState is what is on record of one call id; the zero value is nothing.
type callState uint8

const (
	callUnseen    callState = iota // nothing on record
	callRecording                  // a report of it is being recorded; nothing else is admitted meanwhile
	callRequested                  // its "pre" "requested" is on record: one "post" may follow
	callDone                       // nothing may follow
)

// callTransition is a report admitted by begin: the call's state before it, and once its
// record is kept.
type callTransition struct{ prev, next callState }

// callStates holds the state of every call id the gateway recorded.
type callStates struct {
	mu sync.Mutex
	m  map[string]callState // guarded by mu
}

// begin admits a report of phase and decision for call id, or says why it cannot follow
// what is on record; an admitted call is marked as being recorded until end. Messages name
// the field and never repeat the id.
func (c *callStates) begin(phase, decision, id string) (callTransition, error) {
	if id == "" {
		return callTransition{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.m[id]
	tr := callTransition{prev: cur, next: callDone}
	switch {
	case cur == callRecording:
		return tr, errors.New("call_id: another report of this call is being recorded")
	case phase == phasePre:
		if cur != callUnseen {
			return tr, errors.New("call_id: this call already has a report on record; a call has one " + phasePre + " report, first")
		}
		if decision == decisionRequested {
			tr.next = callRequested
		}
	case phase == phasePost:
		switch cur {
		case callUnseen:
			return tr, errors.New("call_id: no " + phasePre + " report of this call is on record")
		case callDone:
			return tr, errors.New("call_id: this call was refused before it ran, or its outcome is already on record")
		}
	default:
		if cur != callUnseen {
			return tr, errors.New("call_id: this call already has a report on record; a report without a phase must be its only one")
		}
	}
	if c.m == nil {
		c.m = make(map[string]callState)
	}
	c.m[id] = callRecording
	return tr, nil
}

// end settles a report begin admitted: the call takes its next state if the record was kept,
// and goes back to the one before otherwise (so the runtime's retry is admitted).
func (c *callStates) end(id string, tr callTransition, kept bool) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case kept:
		c.m[id] = tr.next
	case tr.prev == callUnseen:
		delete(c.m, id)
	default:
		c.m[id] = tr.prev
	}
}
