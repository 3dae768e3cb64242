package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
)

// Red team of #30's stage ahead (warm bubblewrap slots of a root agora that make their
// claim's directories at fill). Each test is an attack; its comment says what held or broke.

// TestRedStage_RepoWarmAsCold: a dispatch on a repository runs in a staged slot as it runs
// cold. The host checks the revision out into the workspace as root; the slot made that
// directory at fill and gave it to the sandbox uid, and git (as root) refuses a repository
// another user owns ("dubious ownership"): the warm dispatch failed where the cold one
// finished. The workspace's mode the agent sees is the cold one's too.
func TestRedStage_RepoWarmAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 64 << 20 })
	repo := gitRepo(t, map[string]string{"a.txt": "hello\n"})
	e.subagent("repo", `stat -c 'ws:%a:%u' /agora/workspace /agora/out; cat a.txt; echo made >> a.txt`)
	cold := e.run(dispatch.Request{Subagent: "repo", Repo: repo})
	wantFinished(t, cold)
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "repo", Repo: repo})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	if hot.State != cold.State || hot.Reason != cold.Reason {
		t.Fatalf("warm %s %s %q; cold %s %s", hot.State, hot.Reason, hot.Detail, cold.State, cold.Reason)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	if co != ho || !strings.Contains(co, "hello") {
		t.Errorf("the sandbox shows other than cold:\ncold %q\nwarm %q", co, ho)
	}
	if e.patch(hot) != e.patch(cold) || !strings.Contains(e.patch(hot), "+made") {
		t.Errorf("patch warm %q, cold %q", e.patch(hot), e.patch(cold))
	}
}
