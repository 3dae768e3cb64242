package selftest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestStartOrder starts the attacks that wait for a limit first and keeps corpus order
// otherwise.
func TestStartOrder(t *testing.T) {
	attacks := []Attack{{ID: "a"}, {ID: "b", Timeout: time.Second}, {ID: "c"}, {ID: "d", Needs: NeedsDiskQuota}, {ID: "e"}}
	if got, want := startOrder(attacks), []int{1, 3, 0, 2, 4}; !slices.Equal(got, want) {
		t.Errorf("startOrder = %v, want %v", got, want)
	}
}

// TestEach_RunsJobsAtOnce calls every index once, never more than Jobs at a time, and
// reaches Jobs when there is work for it. On a synctest clock each call's sleep ends only
// when every other goroutine is blocked, so every job that can start has started.
func TestEach_RunsJobsAtOnce(t *testing.T) {
	synctest.Test(t, eachRunsJobsAtOnce)
}

func eachRunsJobsAtOnce(t *testing.T) {
	for _, jobs := range []int{1, 3, 8} {
		r := &run{o: Options{Jobs: jobs, Attacks: make([]Attack, 12)}}
		var mu sync.Mutex
		seen := map[int]int{}
		running, most := 0, 0
		r.each(t.Context(), func(i int) {
			mu.Lock()
			seen[i]++
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
		})
		if len(seen) != 12 {
			t.Errorf("jobs %d: %d indices called, want 12", jobs, len(seen))
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("jobs %d: index %d called %d times", jobs, i, n)
			}
		}
		if most != jobs {
			t.Errorf("jobs %d: %d ran at once, want %d", jobs, most, jobs)
		}
	}
}

// TestEach_StopsStartingWhenCancelled starts nothing once ctx is done.
func TestEach_StopsStartingWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := &run{o: Options{Jobs: 1, Attacks: make([]Attack, 10)}}
	n := 0
	r.each(ctx, func(int) {
		n++
		cancel()
	})
	if n > 2 {
		t.Errorf("%d attacks started after the cancel, want at most the one handed over", n-1)
	}
}

// TestUnseen names the host paths a container does not have, and nothing on bubblewrap.
func TestUnseen(t *testing.T) {
	a := Attack{Program: []byte(`attempt cat "$probe/secret" "$home/keys"`)}
	if got := (&run{o: Options{Provider: "local"}}).unseen(a); got != "" {
		t.Errorf("local: %q, want none", got)
	}
	got := (&run{o: Options{Provider: "docker"}}).unseen(a)
	if got != "$home and $probe are host paths a docker sandbox does not have at all" {
		t.Errorf("docker: %q, want $home and $probe named", got)
	}
	if got := (&run{o: Options{Provider: "docker"}}).unseen(Attack{Program: []byte("attempt id")}); got != "" {
		t.Errorf("docker, no host path: %q, want none", got)
	}
}
