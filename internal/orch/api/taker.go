package api

import (
	"context"
	"errors"
)

// Handoff runs the dispatches `agora dispatch run` hands to a taker (`agora orch serve`, the
// resident dispatcher). The taker's server decodes the request and knows the peer; the
// runner decides whether to take it.
type Handoff interface {
	// Prepare checks req from peer and returns the run that carries it out, or an error: a
	// [*Declined] makes the CLI supervise the dispatch itself; any other is the request's.
	// The server calls every run Prepare returns exactly once; a run whose context's cause is
	// [ErrNotStarted] returns at once, having started nothing (what Prepare counted is given
	// back as its run returns).
	Prepare(ctx context.Context, req *HandoffRequest, peer Peer) (func(ctx context.Context, send func(HandoffFrame) error), error)
}

// Peer is who is on the other end of a connection, from SO_PEERCRED at connect.
type Peer struct {
	PID int32
	UID uint32
}

// Declined is a hand-off the taker will not take; the CLI runs the dispatch itself. The
// server answers it with the code [HandoffDeclined].
type Declined struct {
	Why string
	// Kind, when set, is the reason without what the peer chose (the names of its
	// variables): a log that says each reason once a while counts the decline by it, so a peer
	// cannot make each of its requests a reason of its own.
	Kind string
}

func (d *Declined) Error() string { return "hand-off declined: " + d.Why }

// ErrNotStarted is the cause of a run's context when the CLI's stream broke, or the taker
// began stopping, before the dispatch started: the run must start nothing.
var ErrNotStarted = errors.New("the hand-off's stream ended before its dispatch started")
