package selftest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeAgora47s is an `agora dispatch run` that plays one plan file per call (plan.1, plan.2,
// ...) in the run's work directory: what the sandboxed program did (its canary, its report,
// a file dropped in the host's probe directory, a connection to the host's listener) and
// the record agora printed. It writes the canary and report where the runner reads them
// (out/<id>/), and logs each call's --timeout and nonce.
const fakeAgora47s = `#!/bin/bash
[ "$1 $2" = "dispatch run" ] || exit 2
while [ $# -gt 0 ]; do
	case "$1" in
	--input) in="$2"; shift ;;
	--timeout) to="$2"; shift ;;
	esac
	shift
done
field() { printf '%s' "$in" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
n=$(( $(cat count 2>/dev/null || echo 0) + 1 ))
echo "$n" >count
echo "$to" >>timeouts
nonce=$(field nonce)
echo "$nonce" >nonce.$n
canary= report= drop= connect= fail= state=failed reason=timeout
. ./plan.$n
if [ -n "$fail" ]; then echo "agora: $fail" >&2; exit 1; fi
mkdir -p out/d$n
case "$canary" in
mine) echo "$nonce" >out/d$n/canary ;;
first) cat nonce.1 >out/d$n/canary ;;
partial) printf '%s' "${nonce:0:12}" >out/d$n/canary ;;
esac
[ -n "$report" ] && printf '%s\n' "$report" >out/d$n/report
[ -n "$drop" ] && echo leaked >"$(field probe)/drop/leak"
if [ -n "$connect" ]; then exec 3<>/dev/tcp/127.0.0.1/$(field port) && printf 'GET /%s\n' "$nonce" >&3 && cat <&3 >/dev/null; exec 3>&-; sleep 0.1; fi
printf '{"id":"d%s","state":"%s","reason":"%s","detail":"","isolation":"bwrap"}\n' "$n" "$state" "$reason"
[ "$state" = finished ] || exit 1
`

// harness47s is a run whose agora is fakeAgora47s playing plans, one per dispatch.
func harness47s(t *testing.T, provider string, plans ...string) *run {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP: no bash for the fake agora")
	}
	work := t.TempDir()
	agora := filepath.Join(work, "fake-agora")
	if err := os.WriteFile(agora, []byte(fakeAgora47s), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, p := range plans {
		if err := os.WriteFile(filepath.Join(work, "plan."+strconv.Itoa(i+1)), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.close)
	r := &run{o: Options{Agora: agora, Provider: provider, Target: "t"}, work: work,
		repo: filepath.Join(work, "repo"), probe: filepath.Join(work, "probe"), secret: "s3cret",
		env: os.Environ(), listener: ln, fx: &fixtures{}}
	if err := writeProbe(r.probe, r.secret); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *run) calls47s(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.work, "count"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// TestRedTeam47s_RerunNeverLaundersHostBreach: the host-side probe is the runner's own word
// that a boundary did not hold, and a program cannot talk its way out of it. A program that
// makes its attack, withholds its canary and sleeps into its time limit looks like a run that
// started late; were it run again, its probe would be thrown away (probeAfter removes the
// dropped file, the listener is reset) and a well-behaved second run would decide the row
// blocked. A run the probe saw anything of is decided on its own.
func TestRedTeam47s_RerunNeverLaundersHostBreach(t *testing.T) {
	behaved := "canary=mine report=$'refused\\tno route'"
	for name, c := range map[string]struct {
		observe string
		first   string
	}{
		"dropfile": {ObserveDropfile, "drop=1"},
		"listener": {ObserveListener, "connect=1"},
	} {
		t.Run(name, func(t *testing.T) {
			r := harness47s(t, "local", c.first, behaved)
			a := Attack{ID: "x-" + name, Expect: Blocked, Observe: c.observe, Timeout: 10 * time.Second}
			row := r.attack(context.Background(), a)
			t.Logf("calls %d, row %s pass=%v dispatch %s: %s", r.calls47s(t), row.Seen, row.Pass, row.Dispatch, row.Evidence)
			// The harness's breach is real: with this run's canary the probe decides allowed.
			ctl := harness47s(t, "local", c.first+" canary=mine report=$'refused\\tno'")
			if crow := ctl.attack(context.Background(), a); crow.Seen != Allowed {
				t.Fatalf("control: the breach with a canary is %s (%s), want allowed", crow.Seen, crow.Evidence)
			}
			if row.Pass || row.Seen == Blocked {
				t.Errorf("the first run's host probe saw the boundary crossed, yet the row is %s (pass %v): %s",
					row.Seen, row.Pass, row.Evidence)
			}
		})
	}
}

// TestRedTeam47s_TimedAttacksOutlastTheirRerunLimit: a rerun adds a minute (90 s on
// kubernetes) to the attack's limit. A reason-timeout attack whose program sleeps less than
// that would, on a second run whose sandbox starts quickly, finish its sleep before the limit:
// the dispatch ends finished and the row says the wall-clock control failed when it did not.
// Every reason-timeout attack's program outlasts its longest limit.
func TestRedTeam47s_TimedAttacksOutlastTheirRerunLimit(t *testing.T) {
	attacks, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	sleepRE := regexp.MustCompile(`(?m)^\s*sleep\s+([0-9]+)\s*$`)
	busyRE := regexp.MustCompile(`(?m)^\s*while\s+:\s*;\s*do`)
	checked := 0
	for _, a := range attacks {
		if a.Timeout <= 0 || a.Observe != ObserveReason || a.Arg != "timeout" {
			continue
		}
		body, err := corpusFS.ReadFile("corpus/" + a.ID + ".sh")
		if err != nil {
			t.Fatal(err)
		}
		if busyRE.Match(body) {
			continue // spins forever
		}
		var slept time.Duration
		for _, m := range sleepRE.FindAllSubmatch(body, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			slept += time.Duration(n) * time.Second
		}
		checked++
		for _, p := range []string{"local", "docker", "kubernetes"} {
			al := (&run{o: Options{Provider: p}}).startAllowances(a)
			if limit := a.Timeout + al[len(al)-1]; limit >= slept {
				t.Errorf("%s on %s: the rerun's limit %s is not below the %s its program sleeps: a second run "+
					"that starts promptly finishes and the row reads allowed", a.ID, p, limit, slept)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no reason-timeout attack with a sleep in the corpus: the test checks nothing")
	}
}

// TestRedTeam47s_RerunIsBoundedAndNamesTheFirst: a program that never writes its canary and
// always runs into its limit is dispatched exactly twice (limit, then limit plus a minute),
// stays not-run, and its evidence names the first dispatch.
func TestRedTeam47s_RerunIsBoundedAndNamesTheFirst(t *testing.T) {
	r := harness47s(t, "docker", "", "", "", "")
	row := r.attack(context.Background(), Attack{ID: "x", Expect: Blocked, Observe: ObserveReason, Arg: "timeout", Timeout: 10 * time.Second})
	if n := r.calls47s(t); n != 2 {
		t.Errorf("dispatched %d times, want 2", n)
	}
	b, _ := os.ReadFile(filepath.Join(r.work, "timeouts"))
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "10s 1m10s" {
		t.Errorf("time limits %v, want [10s 1m10s]", got)
	}
	if row.Seen != NotRun || row.Pass {
		t.Errorf("row %s pass %v, want not-run failing", row.Seen, row.Pass)
	}
	if !strings.HasPrefix(row.Evidence, "run again: d1 ") || row.Dispatch != "d2" {
		t.Errorf("dispatch %s, evidence %q: want d2, evidence naming d1", row.Dispatch, row.Evidence)
	}
}

// TestRedTeam47s_RerunTakesOnlyItsOwnCanary: the second run has a nonce of its own; the
// first run's canary replayed, or a partial write of its own, is no canary, and a row that
// was not late is not run again.
func TestRedTeam47s_RerunTakesOnlyItsOwnCanary(t *testing.T) {
	reason := Attack{ID: "x", Expect: Blocked, Observe: ObserveReason, Arg: "timeout", Timeout: 10 * time.Second}
	for name, second := range map[string]string{
		"first run's canary": "canary=first",
		"partial canary":     "canary=partial",
	} {
		t.Run(name, func(t *testing.T) {
			r := harness47s(t, "local", "", second)
			row := r.attack(context.Background(), reason)
			n1, _ := os.ReadFile(filepath.Join(r.work, "nonce.1"))
			n2, _ := os.ReadFile(filepath.Join(r.work, "nonce.2"))
			if string(n1) == string(n2) {
				t.Errorf("the rerun reused the nonce %s", n1)
			}
			if row.Seen != NotRun || row.Pass {
				t.Errorf("row %s pass %v (%s), want not-run", row.Seen, row.Pass, row.Evidence)
			}
		})
	}
	// Ended otherwise (limit-exceeded, finished) without a canary: one run, not run.
	r := harness47s(t, "local", "reason=limit-exceeded", "canary=mine")
	if row := r.attack(context.Background(), reason); r.calls47s(t) != 1 || row.Seen != NotRun {
		t.Errorf("not late: %d calls, row %s, want 1 call, not-run", r.calls47s(t), row.Seen)
	}
	// Allowed-expected rows and rows with a canary: one run.
	r = harness47s(t, "local", "canary=mine state=finished reason=", "canary=mine")
	if row := r.attack(context.Background(), Attack{ID: "l", Expect: Allowed, Observe: ObserveReason, Arg: "timeout", Timeout: time.Second}); r.calls47s(t) != 1 || row.Seen != Allowed {
		t.Errorf("finished with canary: %d calls, row %s", r.calls47s(t), row.Seen)
	}
}

// TestRedTeam47s_SecondRunErrorIsNotRun: when the second dispatch cannot be read, the row is
// not run and fails; it never keeps the first run's observation. (Its Dispatch still names
// the first run, whose outcome the evidence no longer describes.)
func TestRedTeam47s_SecondRunErrorIsNotRun(t *testing.T) {
	r := harness47s(t, "local", "", "fail=engine-gone")
	row := r.attack(context.Background(), Attack{ID: "x", Expect: Blocked, Observe: ObserveReason, Arg: "timeout", Timeout: 10 * time.Second})
	if row.Seen != NotRun || row.Pass || !strings.Contains(row.Evidence, "engine-gone") {
		t.Errorf("row %s pass %v: %s; want not-run with the error", row.Seen, row.Pass, row.Evidence)
	}
	t.Logf("dispatch %q evidence %q", row.Dispatch, row.Evidence)
}

// TestRedTeam47s_MarkedEntryOfAnotherRun: an audit entry holding another nonce's mark is no
// proof this run's program ran: the run is late and not run; its own mark is.
func TestRedTeam47s_MarkedEntryOfAnotherRun(t *testing.T) {
	a := Attack{Observe: ObserveEntries, Arg: "600", Timeout: 20 * time.Second, Expect: Blocked}
	const nonce = "0123456789abcdef01234567"
	other := seen{rec: record{ID: "d2", State: "failed", Reason: "timeout"},
		host: hostSeen{entries: []logEntry{{Details: map[string]any{"call_id": mark("fedcba9876543210fedcba98") + "-0"}}}}}
	if !startedLate(a, nonce, other) {
		t.Error("another run's mark: not late, want late")
	}
	if got, _ := (&run{}).decide(a, nonce, other); got != NotRun {
		t.Errorf("another run's mark: %s, want not-run", got)
	}
	own := other
	own.host.entries = []logEntry{{Details: map[string]any{"call_id": mark(nonce) + "-0"}}}
	if startedLate(a, nonce, own) {
		t.Error("own mark: late, want decided on this run")
	}
}
