package local

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Start_ForkBombIsContained(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	var runAs *compute.HostUser
	if os.Getuid() == 0 {
		// The kernel never enforces RLIMIT_NPROC for host root; run the sandbox as an
		// unprivileged host user, as a root caller should.
		runAs = testRunAs
	}
	const maxProcs = 64
	// samplesAtLimit is how many samples the bomb is watched for once it is at the limit
	// (half of it or more) before the test ends it: the check that it stays below counts
	// samples, not seconds, so a loaded machine only makes the test longer.
	const samplesAtLimit = 50
	marker := sleepMarker(t)
	// Every iteration forks a subshell that forks a sleep; failures are ignored so the
	// loop keeps pushing against the limit until it is ended.
	script := "while :; do (sleep " + marker + " &) 2>/dev/null; done"
	var out syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.Start(ctx, compute.Spec{
		ID: "bomb", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Stdout: &out, Stderr: &out,
		// Only a guard: the test ends the bomb once it has watched it at the limit.
		Limits: compute.Limits{MaxProcs: maxProcs, Timeout: 2 * time.Minute},
		RunAs:  runAs,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	peak, atLimit := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Wait()
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, sleepsWith(marker))
			if peak >= maxProcs/2 {
				if atLimit++; atLimit == samplesAtLimit {
					cancel()
				}
			}
		}
	}
	exit, _ := h.Wait()
	if !exit.Cancelled || exit.TimedOut {
		t.Errorf("exit = %+v, want the bomb ended by the test's cancel, not its guard timeout", exit)
	}
	// The sleeps share the limit with bwrap's init, the shell and its subshells,
	// so they alone stay below it.
	if peak >= maxProcs {
		t.Errorf("peak of %d sandbox sleeps exceeds MaxProcs %d", peak, maxProcs)
	}
	if peak < maxProcs/2 {
		t.Errorf("peak of %d sandbox sleeps: the bomb never reached the limit", peak)
	}
	t.Logf("peak %d sleeps under MaxProcs %d, %d samples at half of it or more; isolation %s", peak, maxProcs, atLimit, exit.Isolation)
	if left := procsWith(marker); len(left) > 0 {
		t.Errorf("processes left after the bomb: %d", len(left))
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("host cannot fork after the bomb: %v", err)
	}
}
