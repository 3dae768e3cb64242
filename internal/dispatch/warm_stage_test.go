package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// stageProbe prints where its workspace lives (the source and size of the file system under
// /agora/workspace, as its mount table says) and leaves a file for the patch.
const stageProbe = `awk '$5=="/agora/workspace" {for(i=7;i<=NF;i++) if($i=="-") print "src:" $(i+2) " type:" $(i+1)}' /proc/self/mountinfo
df -k /agora/workspace | awk 'NR==2 {print "size:" $2}'
ls -A /agora/workspace /agora/out | tr '\n' ' '; echo
echo made > made.txt`

// TestWarm_StagedAhead: a warm dispatch of a root agora runs on the
// directories and disk quota its slot made at fill: its workspace is the slot's quota (named
// after the slot, not the dispatch, so nothing was mounted for the dispatch), of the target's
// size, empty but for what the dispatch brought, and it ends with the cold dispatch's state,
// isolation and patch; nothing is mounted under its stage directory. When the pools close,
// the slots' stages are gone with every mount.
func TestWarm_StagedAhead(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 100 << 20 })
	e.subagent("stg", stageProbe)
	cold := e.run(dispatch.Request{Subagent: "stg"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "stg"})
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold:\n%swarm:\n%s", co, ho)
	if !strings.Contains(co, "src:agora-"+cold.ID+" type:tmpfs") {
		t.Fatalf("the cold workspace is not on its own quota:\n%s", co)
	}
	if !strings.Contains(ho, "src:agora-slot-") || !strings.Contains(ho, "type:tmpfs") || strings.Contains(ho, hot.ID) {
		t.Errorf("the warm workspace is not the slot's quota made at fill:\n%s", ho)
	}
	line := func(out, key string) string {
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, key) {
				return l
			}
		}
		return ""
	}
	for _, k := range []string{"size:", "/agora/out:"} {
		if line(co, k) != line(ho, k) {
			t.Errorf("%s cold %q, warm %q", k, line(co, k), line(ho, k))
		}
	}
	if strings.Count(ho, "\n") != strings.Count(co, "\n") {
		t.Errorf("the warm sandbox shows other than the cold one:\ncold %q\nwarm %q", co, ho)
	}
	if hot.Isolation != cold.Isolation || !strings.Contains(hot.Isolation, "+disk-quota") {
		t.Errorf("isolation warm %q, cold %q", hot.Isolation, cold.Isolation)
	}
	if e.patch(hot) != e.patch(cold) || !strings.Contains(e.patch(hot), "+made") {
		t.Errorf("patch warm %q, cold %q", e.patch(hot), e.patch(cold))
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		if m := agoratest.MountsUnder(t, filepath.Join(e.home.Dir, home.DispatchDir, r.ID)); len(m) > 0 {
			t.Errorf("mounts left under %s's stage: %v", r.ID, m)
		}
	}
	w.Close()
	warmRoot := filepath.Join(e.home.Dir, home.DispatchDir, ".warm")
	if m := agoratest.MountsUnder(t, warmRoot); len(m) > 0 {
		t.Errorf("mounts left of the closed pools' slots: %v", m)
	}
	if dirs, _ := filepath.Glob(filepath.Join(warmRoot, config.DefaultTarget, "slot-*")); len(dirs) > 0 {
		t.Errorf("slot directories left after Close: %v", dirs)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".held")); len(ents) > 0 {
		t.Errorf("held stages left: %v", ents)
	}
}

// TestWarm_StagedQuotaBinds: the disk quota a slot made at fill binds its dispatch as the
// cold dispatch's binds it: a filler ends failed limit-exceeded with the same detail, its
// writes stopped at the quota.
func TestWarm_StagedQuotaBinds(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 100 << 20 })
	e.subagent("filler", diskFiller)
	cold := e.run(dispatch.Request{Subagent: "filler"})
	if cold.State != lifecycle.DispatchFailed || cold.Reason != lifecycle.ReasonLimitExceeded {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "filler"})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the filler did not run in the slot", c)
	}
	if hot.State != cold.State || hot.Reason != cold.Reason || hot.Detail != cold.Detail || hot.Isolation != cold.Isolation {
		t.Errorf("warm %s %s %q %q, cold %s %s %q %q", hot.State, hot.Reason, hot.Detail, hot.Isolation, cold.State, cold.Reason, cold.Detail, cold.Isolation)
	}
	if out := e.stdout(hot); !strings.Contains(out, "No space left on device") {
		t.Errorf("the warm filler was not stopped by the quota:\n%s", out)
	}
}
