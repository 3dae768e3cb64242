package dispatchcmd

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// declineEvery is how often the resident says a decline of one reason, or a refusal of one
// route and status, in resident.log: a shell of another environment running dispatches in a
// loop, or a process of this user posting hand-offs or bad requests, would otherwise grow the
// log by a line each, while it is capped only when a resident starts (48b).
const declineEvery = time.Minute

// maxDeclineReasons bounds the reasons remembered; past it the memory starts over (a
// reason is a fixed sentence, but one names the peer's uid; an environment's is counted by
// its kind, api.Declined.Kind, since it names the peer's variables).
const maxDeclineReasons = 64

// declineLog counts a resident's declines by reason (or, in its refusals, the server's
// warnings by message, route and status) and says when one should be written.
type declineLog struct {
	mu      sync.Mutex
	n       int
	reasons map[string]*declineReason
}

type declineReason struct {
	said   time.Time // when it was last written
	unsaid int       // declines of it since, not written
}

// add counts a decline for why at now. say: write it now; more: how many of it went
// unwritten before this one.
func (l *declineLog) add(why string, now time.Time) (say bool, more int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	r := l.reasons[why]
	if r == nil {
		if l.reasons == nil || len(l.reasons) >= maxDeclineReasons {
			l.reasons = map[string]*declineReason{}
		}
		l.reasons[why] = &declineReason{said: now}
		return true, 0
	}
	if now.Sub(r.said) < declineEvery {
		r.unsaid++
		return false, 0
	}
	more, r.said, r.unsaid = r.unsaid, now, 0
	return true, more
}

// total is how many it counted, written or not.
func (l *declineLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// limited is a [slog.Handler] that writes a line of one kind (its message, and the values of
// the attributes named in keys) at most once every declineEvery, with how many went unsaid
// before it: the resident's server says each refusal (a 400, a 404) at warn.
type limited struct {
	slog.Handler
	keys []string
	seen *declineLog
}

func (h limited) Handle(ctx context.Context, r slog.Record) error {
	kind := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if slices.Contains(h.keys, a.Key) {
			kind += " " + a.String()
		}
		return true
	})
	say, more := h.seen.add(kind, time.Now())
	if !say {
		return nil
	}
	if more > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("unsaid_before", more))
	}
	return h.Handler.Handle(ctx, r)
}

func (h limited) WithAttrs(as []slog.Attr) slog.Handler {
	return limited{h.Handler.WithAttrs(as), h.keys, h.seen}
}

func (h limited) WithGroup(name string) slog.Handler {
	return limited{h.Handler.WithGroup(name), h.keys, h.seen}
}
