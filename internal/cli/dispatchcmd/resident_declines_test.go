package dispatchcmd

import (
	"testing"
	"time"
)

// TestDeclineLog_OnceAMinuteEachReason: the first decline of a reason is said; the next ones
// within declineEvery are counted, and said with the first one after it; another reason is
// said at once; total counts them all.
func TestDeclineLog_OnceAMinuteEachReason(t *testing.T) {
	var l declineLog
	t0 := time.Unix(1_800_000_000, 0)
	steps := []struct {
		why       string
		at        time.Duration
		say       bool
		unsaidNow int
	}{
		{"env", 0, true, 0},
		{"env", time.Second, false, 0},
		{"env", 59 * time.Second, false, 0},
		{"home", 59 * time.Second, true, 0},
		{"env", declineEvery, true, 2},
		{"env", declineEvery + time.Second, false, 0},
		{"env", 3 * declineEvery, true, 1},
	}
	for i, s := range steps {
		say, more := l.add(s.why, t0.Add(s.at))
		if say != s.say || more != s.unsaidNow {
			t.Errorf("step %d (%s at %s): say %v with %d unsaid, want %v with %d", i, s.why, s.at, say, more, s.say, s.unsaidNow)
		}
	}
	if n := l.total(); n != len(steps) {
		t.Errorf("total %d, want %d", n, len(steps))
	}
}

// TestDeclineLog_Bounded: reasons past maxDeclineReasons start the memory over, so a peer
// that varies its reason (a uid) cannot grow it without bound; each new one is said.
func TestDeclineLog_Bounded(t *testing.T) {
	var l declineLog
	now := time.Unix(1_800_000_000, 0)
	for i := range 10 * maxDeclineReasons {
		if say, _ := l.add(string(rune('a'+i%26))+string(rune(i)), now); !say {
			t.Fatalf("reason %d, new, was not said", i)
		}
		if len(l.reasons) > maxDeclineReasons {
			t.Fatalf("%d reasons remembered, cap %d", len(l.reasons), maxDeclineReasons)
		}
	}
}
