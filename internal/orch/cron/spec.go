package cron

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the zone database when the host has none (see the package doc)

	robfig "github.com/robfig/cron/v3"

	"github.com/agora-dev/agora/internal/errclass"
)

// Limits on what a schedule says.
const (
	MaxSpecLen = 128 // bytes of a cron spec
	MaxZoneLen = 64  // bytes of a zone name
	// MaxMissedCount bounds how many missed slots are counted one by one; a longer outage
	// reports this many (and the latest slot is still found exactly). Ten thousand is a week
	// of an every-minute schedule, and bounds the walk a fire makes to about 10 ms (100,000 took
	// 50-90 ms).
	MaxMissedCount = 10_000
)

// DefaultZone is the zone of a schedule that names none.
const DefaultZone = "UTC"

// Spec is a checked cron spec in a zone: when a schedule's slots are.
type Spec struct {
	text  string
	zone  *time.Location
	sched *robfig.SpecSchedule
	// fixed: neither the minute nor the hour field starts with '*' (a descriptor other than
	// @hourly included), so a slot a clock change skips runs at the first instant after the
	// change, as cron runs such "fixed-time" jobs; a wildcard spec's skipped minutes have no slot.
	fixed bool
}

// parser reads standard 5-field specs and the descriptors; never seconds.
var parser = sync.OnceValue(func() robfig.Parser {
	return robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)
})

var zonePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$`) })

// descriptors are the named specs accepted; @every is not one (its slots would depend on when
// serve started, not on the clock).
var descriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// ErrNeverFires matches a spec that names no date there is (such as 30 February).
var ErrNeverFires = errors.New("cron spec never fires")

// Parse checks spec (five fields: minute, hour, day of month, month, day of week; or a
// descriptor such as @daily) and zone (an IANA name such as Europe/Berlin; "" is UTC), and
// returns the spec with its text normalised (fields separated by one space). It refuses
// @every, a TZ= prefix (the zone is zone), seconds, and a spec that never fires. A refusal is
// invalid input ([errclass.Invalid]) wherever the spec came from: the CLI's check before it
// reads the plan and the service's check answer alike.
func Parse(spec, zone string) (*Spec, error) {
	s, err := parseSpec(spec, zone)
	if err != nil {
		return nil, errclass.AsInvalid(err)
	}
	return s, nil
}

func parseSpec(spec, zone string) (*Spec, error) {
	text := strings.Join(strings.Fields(spec), " ")
	switch {
	case text == "":
		return nil, errors.New("cron spec is empty; want five fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily")
	case len(spec) > MaxSpecLen:
		return nil, fmt.Errorf("cron spec is %d bytes; at most %d", len(spec), MaxSpecLen)
	case !printableASCII(text):
		return nil, errors.New("cron spec holds characters other than printable ASCII")
	case strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ="):
		return nil, errors.New("cron spec names its zone with TZ=; give the zone with --tz instead")
	case strings.HasPrefix(text, "@") && !isDescriptor(text):
		return nil, fmt.Errorf("cron spec %q: unknown descriptor; want one of %s (@every is not a schedule of slots)", text, strings.Join(descriptors, ", "))
	case !strings.HasPrefix(text, "@") && len(strings.Fields(text)) != 5:
		return nil, fmt.Errorf("cron spec %q has %d fields; want five: minute hour day-of-month month day-of-week", text, len(strings.Fields(text)))
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return nil, err
	}
	s, err := parse(text)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %w", text, err)
	}
	s.Location = loc
	out := &Spec{text: text, zone: loc, sched: s, fixed: fixedTime(text)}
	// Every date a spec can name comes round within eight years (29 February within four),
	// so a spec without a slot in that time has none.
	from := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 2; i++ {
		if out.next(from).IsZero() {
			return nil, fmt.Errorf("cron spec %q: %w: no date matches its day, month and weekday fields", text, ErrNeverFires)
		}
		from = from.AddDate(4, 0, 0)
	}
	return out, nil
}

// parse runs the library's parser; a panic in it is an error, not a crash of serve.
func parse(text string) (s *robfig.SpecSchedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("not a cron spec")
		}
	}()
	sched, err := parser().Parse(text)
	if err != nil {
		return nil, err
	}
	ss, ok := sched.(*robfig.SpecSchedule)
	if !ok {
		return nil, errors.New("not a schedule of slots")
	}
	return ss, nil
}

// LoadZone loads an IANA zone by name ("" is UTC). "Local" is refused: a standing order must
// not change meaning with the host it runs on.
func LoadZone(name string) (*time.Location, error) {
	name = cmp.Or(name, DefaultZone)
	if len(name) > MaxZoneLen || !zonePattern().MatchString(name) || name == "Local" {
		return nil, fmt.Errorf("time zone %q: want an IANA zone name such as UTC or Europe/Berlin", clip(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: not in the IANA time zone database; want a name such as UTC or Europe/Berlin", name)
	}
	return loc, nil
}

// String is the normalised spec.
func (s *Spec) String() string { return s.text }

// Zone is the spec's zone name.
func (s *Spec) Zone() string { return s.zone.String() }

// Next returns the first slot strictly after t, in UTC; zero when there is none within five
// years (Parse refuses a spec for which that can happen).
func (s *Spec) Next(t time.Time) time.Time { return s.next(t) }

// The search for the next slot. github.com/robfig/cron/v3's own Next loops forever in some
// zones (Pacific/Apia skipped 30 December 2011, and its day loop never leaves 29 December: a
// case of TestSpec_Next), which would stop every schedule of serve; so the fields it parsed
// are searched here, with a bound (TestSpec_NextMatchesEveryMinute checks it against a scan
// of every minute around clock changes).
const (
	// searchDays bounds the search: every date a spec can name comes round within five
	// years, and a little more covers where the search starts.
	searchDays = 5*366 + 2
	// shiftWindow is more than any clock change (at most 2h in the database): only within it
	// of a change can a later wall-clock minute have an earlier instant.
	shiftWindow = 3 * time.Hour
	starBit     = 1 << 63 // a field written as * (github.com/robfig/cron/v3's own marker)
)

// next is the earliest slot strictly after t. A slot is a wall-clock minute of the zone the
// fields match, at its first instant: a minute a clock change repeats has one, the first time
// it comes, and one it skips has none, unless the spec is a fixed-time one ([Spec.fixed]),
// whose skipped slot comes at the first instant after the change (as cron does both).
func (s *Spec) next(t time.Time) time.Time {
	from := t.In(s.zone)
	if !s.steady(t) {
		// Near a clock change a wall-clock minute before t's can have an instant after it.
		from = t.Add(-shiftWindow).In(s.zone)
	}
	y, mo, d := from.Date()
	var best time.Time
	var horizon time.Time // wall-clock time (written as UTC) after which nothing can come earlier
	for day := 0; day < searchDays; day++ {
		date := time.Date(y, mo, d+day, 0, 0, 0, 0, time.UTC)
		if !s.dayMatches(date) {
			continue
		}
		h0, m0 := 0, 0
		if day == 0 {
			h0, m0 = from.Hour(), from.Minute()
		}
		for h := h0; h < 24; h++ {
			if s.sched.Hour&(1<<uint(h)) == 0 {
				continue
			}
			first := 0
			if h == h0 {
				first = m0
			}
			for m := first; m < 60; m++ {
				if s.sched.Minute&(1<<uint(m)) == 0 {
					continue
				}
				wall := time.Date(date.Year(), date.Month(), date.Day(), h, m, 0, 0, time.UTC)
				if !horizon.IsZero() && wall.After(horizon) {
					return best.UTC()
				}
				at := time.Date(date.Year(), date.Month(), date.Day(), h, m, 0, 0, s.zone)
				if lw := at.In(s.zone); lw.Day() != date.Day() || lw.Hour() != h || lw.Minute() != m {
					if !s.fixed {
						continue // skipped by a clock change: no slot
					}
					at = s.afterGap(at, wall) // a fixed time: the first instant after the change
				}
				steady := s.steady(at)
				if !steady {
					at = s.firstInstant(at)
				}
				if !at.After(t) {
					continue
				}
				if best.IsZero() || at.Before(best) {
					best = at
				}
				if horizon.IsZero() {
					if steady {
						return at.UTC()
					}
					horizon = wall.Add(shiftWindow)
				}
			}
		}
	}
	if best.IsZero() {
		return best
	}
	return best.UTC()
}

// fixedTime reports whether a normalised spec is a fixed-time one: its minute and hour fields
// do not start with '*' (cron's own test). Every descriptor is but @hourly.
func fixedTime(text string) bool {
	switch text {
	case "@hourly":
		return false
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight":
		return true
	}
	f := strings.Fields(text)
	return len(f) == 5 && !strings.HasPrefix(f[0], "*") && !strings.HasPrefix(f[1], "*")
}

// gapWindow bounds how far from time.Date's instant for a skipped minute the change is: a
// whole day and a little more (Pacific/Apia skipped 30 December 2011).
const gapWindow = 26 * time.Hour

// afterGap is the first instant whose wall clock in the zone is later than wall (a wall-clock
// minute a clock change skips, written as UTC; at is time.Date's instant for it): the instant
// the clock jumped, to the minute. A binary search over the minutes within gapWindow of at
// (no zone changes its clock twice within a day).
func (s *Spec) afterGap(at, wall time.Time) time.Time {
	later := func(x time.Time) bool {
		l := x.In(s.zone)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC).After(wall)
	}
	lo, hi := at.Add(-gapWindow).Truncate(time.Minute), at.Add(gapWindow).Truncate(time.Minute)
	for hi.Sub(lo) > time.Minute {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Minute)
		if later(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// steady reports whether the zone's offset is the same throughout shiftWindow either side of
// at, so no later wall-clock minute can have an earlier instant.
func (s *Spec) steady(at time.Time) bool {
	_, o1 := at.Add(-shiftWindow).In(s.zone).Zone()
	_, o2 := at.In(s.zone).Zone()
	_, o3 := at.Add(shiftWindow).In(s.zone).Zone()
	return o1 == o2 && o2 == o3
}

// firstInstant is the first instant whose wall clock in the zone is at's (at itself unless a
// clock change repeats that minute: time.Date gives the later one of the two).
func (s *Spec) firstInstant(at time.Time) time.Time {
	w := at.In(s.zone)
	first := at
	for k := 1; k <= int(shiftWindow/(15*time.Minute)); k++ {
		c := at.Add(-time.Duration(k) * 15 * time.Minute).In(s.zone)
		if c.Day() == w.Day() && c.Hour() == w.Hour() && c.Minute() == w.Minute() {
			first = c
		}
	}
	return first
}

// dayMatches applies the month, day-of-month and day-of-week fields as cron does: when
// either day field is *, both must match; otherwise either may.
func (s *Spec) dayMatches(date time.Time) bool {
	f := s.sched
	if f.Month&(1<<uint(date.Month())) == 0 {
		return false
	}
	dom := f.Dom&(1<<uint(date.Day())) != 0
	dow := f.Dow&(1<<uint(date.Weekday())) != 0
	if f.Dom&starBit != 0 || f.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// Due returns the slots due at now after the slot last (zero: the schedule has fired none;
// then after created): the latest slot at or before now, and how many earlier ones there were
// (the missed slots coalesced into it, counted up to MaxMissedCount). ok is false when no
// slot is due.
func (s *Spec) Due(last, now time.Time) (latest time.Time, missed int, ok bool) {
	first := s.next(last)
	if first.IsZero() || first.After(now) {
		return time.Time{}, 0, false
	}
	latest, count := first, 0
	for n := s.next(first); !n.IsZero() && !n.After(now); n = s.next(n) {
		latest = n
		count++
		if count == MaxMissedCount {
			latest = s.latestAtOrBefore(latest, now)
			break
		}
	}
	return latest, count, true
}

// latestAtOrBefore finds the last slot at or before now, given a slot lo at or before now,
// by bisecting on the time Next starts from: O(log(now - lo)) calls of Next.
func (s *Spec) latestAtOrBefore(lo, now time.Time) time.Time {
	a, b := lo, now // s.next(a) <= now, or a is the answer; s.next(b) > now
	if n := s.next(a); n.IsZero() || n.After(now) {
		return lo
	}
	for b.Sub(a) > time.Second {
		mid := a.Add(b.Sub(a) / 2)
		if n := s.next(mid); !n.IsZero() && !n.After(now) {
			a = mid
		} else {
			b = mid
		}
	}
	return s.next(a)
}

func isDescriptor(s string) bool {
	for _, d := range descriptors {
		if s == d {
			return true
		}
	}
	return false
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// clip cuts a name echoed in an error to a readable length.
func clip(s string) string {
	if len(s) > MaxZoneLen {
		return s[:MaxZoneLen] + "..."
	}
	return s
}
