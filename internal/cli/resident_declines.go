package cli

import (
	"sync"
	"time"
)

// declineEvery is how often the resident says a decline of one reason in resident.log: a
// shell of another environment running dispatches in a loop, or a process of this user
// posting hand-offs, would otherwise grow the log by a line each, while it is capped only
// when a resident starts (red team 48).
const declineEvery = time.Minute

// maxDeclineReasons bounds the reasons remembered; past it the memory starts over (a
// reason is a fixed sentence, but one names the peer's uid).
const maxDeclineReasons = 64

// declineLog counts a resident's declines by reason and says when one should be written.
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
	if l.reasons == nil || len(l.reasons) >= maxDeclineReasons {
		l.reasons = map[string]*declineReason{}
	}
	r := l.reasons[why]
	if r == nil {
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

// total is how many hand-offs were declined.
func (l *declineLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
