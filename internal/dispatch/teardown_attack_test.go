package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSupervise_BackgroundTeardowns_NextDispatchGetsTheUID: with BackgroundTeardowns, the
// caller of Supervise (the CLI behind a hand-off) has its answer while the dispatch still
// holds its uid lease. Attack: a target whose sandbox_uid range has one uid (sandbox_uid
// 2147483647, which agora.yaml accepts), dispatches run one after the other, each once the
// previous one's Supervise returned, as a script of `agora dispatch run`s through the
// resident runs them. The first's release is held until the second, refused the uid, waits
// for it (in a build that does not wait: until the second has ended, refused). Want: the
// second waits for the release running in its own process and finishes.
func TestSupervise_BackgroundTeardowns_NextDispatchGetsTheUID(t *testing.T) {
	requireRootLimits(t)
	e := newEnvYAML(t, "targets:\n  local:\n    disk: 64MiB\n    sandbox_uid: 2147483647\n")
	e.subagent("hi", "echo hi")
	wait := e.d.BackgroundTeardowns()
	t.Cleanup(wait)
	settling, secondDone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dispatch.SetSettling(e.d, func() { once.Do(func() { close(settling) }) })
	dispatch.SetBeforeRelease(e.d, func() {
		select {
		case <-settling:
		case <-secondDone:
		}
	})
	first := e.run(dispatch.Request{Subagent: "hi"})
	if first.State != lifecycle.DispatchFinished {
		t.Fatalf("first dispatch = %s/%s (%s), want finished", first.State, first.Reason, first.Detail)
	}
	second := e.run(dispatch.Request{Subagent: "hi"})
	close(secondDone)
	if second.State != lifecycle.DispatchFinished {
		t.Errorf("second dispatch, started after the first's Supervise returned = %s/%s (%s), want finished: "+
			"the first's background release still held the target's only sandbox uid", second.State, second.Reason, second.Detail)
	}
	select {
	case <-settling:
	default:
		t.Error("the second dispatch never waited for the first's release: the uid was free, not the case under test")
	}
}

// TestSupervise_BackgroundTeardowns_SameUIDNeverSeesLeftovers: dispatches run one after the
// other in one process with BackgroundTeardowns, the sandbox uid range one uid wide so that
// every dispatch gets the same uid. Attack: each dispatch looks for what the previous one
// left (a file in /tmp of its own sandbox, its workspace, and the host's stage directories
// it could name), leaves some for the next and leaves processes behind. Whatever the timing
// of the previous release, every dispatch runs and sees none of it, and once the wait
// returns nothing is held or mounted and nothing runs as the uid.
func TestSupervise_BackgroundTeardowns_SameUIDNeverSeesLeftovers(t *testing.T) {
	requireRootLimits(t)
	e := newEnvYAML(t, "targets:\n  local:\n    disk: 64MiB\n    sandbox_uid: 2147483647\n")
	e.subagent("snoop", `found=""
for f in /tmp/left ./left ../*/workspace/left ../*/out/left; do [ -e "$f" ] && found="$found $f"; done
echo "found:$found"
echo x > /tmp/left; echo x > ./left; (sleep 30 &) ; setsid sleep 31 &`)
	wait := e.d.BackgroundTeardowns()
	for i := range 15 {
		r := e.run(dispatch.Request{Subagent: "snoop"})
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("dispatch %d = %s/%s (%s), want finished", i, r.State, r.Reason, r.Detail)
		}
		if out := e.stdout(r); !strings.HasPrefix(out, "found:\n") {
			t.Errorf("dispatch %d saw what an earlier one left:\n%s", i, out)
		}
	}
	wait()
	held, _ := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".held"))
	if len(held) != 0 {
		t.Errorf("held after the wait: %v", held)
	}
	if m := agoratest.MountsUnder(t, e.home.Dir); len(m) != 0 {
		t.Errorf("mounted after the wait: %v", m)
	}
	if pids := agoratest.ProcsOfUID("2147483647"); len(pids) != 0 {
		t.Errorf("processes still run as the sandbox uid after the wait: %v", pids)
	}
}
