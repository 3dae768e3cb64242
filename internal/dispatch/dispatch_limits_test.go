package dispatch_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// The target's limits bind whoever runs agora, root included.

// requireRootLimits skips loudly unless the test runs as root, where the sandbox user and the
// disk quota apply.
func requireRootLimits(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: only a root agora runs sandboxes as the sandbox uid and mounts disk quotas")
	}
}

// setTarget changes the default target of e's in-process dispatcher.
func (e *env) setTarget(change func(*config.Target)) {
	tg := e.home.Config.Targets[config.DefaultTarget]
	change(&tg)
	e.home.Config.Targets[config.DefaultTarget] = tg
}

// limitsBlob returns the content of an artifact.
func (e *env) limitsBlob(a *dispatch.Artifact) string {
	e.t.Helper()
	b, err := e.home.Blobs.Get(a.Digest, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// forkBomb starts 400 children that each sleep (one process each, never exiting early) from
// an inner shell, which gives up at the first fork that fails (dash does), then counts with
// shell builtins alone (no fork is left to spare) the processes alive in the sandbox's pid
// namespace: every child that ran is still there.
const forkBomb = `sh -c 'i=0; while [ $i -lt 400 ]; do (exec sleep 60) & i=$((i+1)); done' 2>/dev/null
n=0; for p in /proc/[0-9]*; do n=$((n+1)); done
echo "procs=$n"`

// TestDispatch_MaxProcsBindsAsRoot: a fork of 400 processes under max_procs: 256 through a
// real dispatch. Before the fix a root agora ran all 400 (the kernel never applies
// RLIMIT_NPROC to host root) and recorded nproc-unenforced; now the sandbox runs as the
// target's sandbox uid, where the limit binds.
func TestDispatch_MaxProcsBindsAsRoot(t *testing.T) {
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.MaxProcs = 256 })
	e.subagent("bomb", forkBomb)
	r := e.run(dispatch.Request{Subagent: "bomb", Timeout: 2 * time.Minute})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s), isolation %s", r.State, r.Reason, r.Detail, r.Isolation)
	}
	out := e.stdout(r)
	i := strings.Index(out, "procs=")
	if i < 0 {
		t.Fatalf("the agent did not report its count:\n%s", out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out[i+len("procs="):]))
	if err != nil {
		t.Fatalf("count %q: %v", out[i:], err)
	}
	t.Logf("%d processes at once in a sandbox with max_procs 256; isolation %s", n, r.Isolation)
	if n > 256 {
		t.Errorf("%d processes ran at once under max_procs: 256", n)
	}
	// The worker's threads count against the limit too; most of the rest went to the
	// bomb, so it did reach the limit.
	if n < 200 {
		t.Errorf("only %d processes: the bomb never reached the limit", n)
	}
	if strings.Contains(r.Isolation, "nproc-unenforced") {
		t.Errorf("isolation %q says the process limit was not enforced", r.Isolation)
	}
	if os.Geteuid() == 0 && !strings.Contains(r.Isolation, "+runas") {
		t.Errorf("isolation %q, want +runas for a root agora", r.Isolation)
	}
}

// diskFiller writes 300 MiB into the workspace and reports how dd ended.
const diskFiller = `dd if=/dev/zero of=big bs=1M count=300 2>&1; echo "dd=$?"`

// TestDispatch_DiskQuotaExceeded: a disk filler under a 100 MiB quota ends failed
// limit-exceeded with a detail that names the quota; its writes stopped at the quota (dd
// saw ENOSPC), so the host's disk never held them, and the quota's mount is gone after.
func TestDispatch_DiskQuotaExceeded(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 100 << 20 })
	e.subagent("filler", diskFiller)
	r := e.run(dispatch.Request{Subagent: "filler"})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonLimitExceeded {
		t.Fatalf("state %s (%s: %s), want failed limit-exceeded", r.State, r.Reason, r.Detail)
	}
	if !strings.Contains(r.Detail, "disk quota") || !strings.Contains(r.Detail, "100MiB") {
		t.Errorf("detail %q does not name the disk quota and its size", r.Detail)
	}
	if out := e.stdout(r); !strings.Contains(out, "No space left on device") {
		t.Errorf("dd was not stopped by the quota:\n%s", out)
	}
	if !strings.Contains(r.Isolation, "+disk-quota") {
		t.Errorf("isolation %q, want +disk-quota", r.Isolation)
	}
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	if m := agoratest.MountsUnder(t, stage); len(m) > 0 {
		t.Errorf("mounts left under the stage after the dispatch: %v", m)
	}
	if _, err := os.Stat(filepath.Join(stage, "stdout.log")); err != nil {
		t.Errorf("the live log must outlive the quota's mount: %v", err)
	}
}

// TestDispatch_DiskQuotaRoomy: a dispatch that stays under its quota finishes, its outputs
// and patch collected from the quota's tmpfs.
func TestDispatch_DiskQuotaRoomy(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 100 << 20 })
	e.subagent("modest", `head -c 10000000 /dev/zero > ten; mkdir -p "$AGORA_OUT/outputs"; echo hi > "$AGORA_OUT/outputs/hi"`)
	r := e.run(dispatch.Request{Subagent: "modest"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if len(r.Result.Outputs) != 1 || r.Result.Patch == nil {
		t.Errorf("outputs %+v, patch %+v: want outputs/hi and a patch", r.Result.Outputs, r.Result.Patch)
	}
	if !strings.Contains(r.Isolation, "+runas") || !strings.Contains(r.Isolation, "+disk-quota") {
		t.Errorf("isolation %q, want +runas and +disk-quota", r.Isolation)
	}
}

// TestDispatch_DiskQuotaCountsTheClone: the repository's checkout lives on the quota too; a
// clone that does not fit ends the dispatch limit-exceeded before anything runs.
func TestDispatch_DiskQuotaCountsTheClone(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = config.MinDisk })
	big := make([]byte, 3<<20) // incompressible, so git cannot pack it below the quota
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t, map[string]string{"big.bin": string(big)})
	e.subagent("never", `echo ran`)
	r := e.run(dispatch.Request{Subagent: "never", Repo: repo})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonLimitExceeded || !strings.Contains(r.Detail, "while cloning") {
		t.Fatalf("state %s (%s: %s), want failed limit-exceeded while cloning", r.State, r.Reason, r.Detail)
	}
	if m := agoratest.MountsUnder(t, filepath.Join(e.home.Dir, home.DispatchDir, r.ID)); len(m) > 0 {
		t.Errorf("mounts left after the dispatch: %v", m)
	}
}

// TestDispatch_DiskUnenforcedSaysSo: without root no quota can be mounted, and the record
// says so instead of implying one.
func TestDispatch_DiskUnenforcedSaysSo(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("SKIP: runs as root, where the quota is enforced (TestDispatch_DiskQuotaExceeded)")
	}
	e := newEnv(t)
	e.subagent("quick", `echo hi > hi.txt`)
	r := e.run(dispatch.Request{Subagent: "quick"})
	if r.State != lifecycle.DispatchFinished || !strings.HasSuffix(r.Isolation, "+disk-unenforced") {
		t.Errorf("state %s, isolation %q; want finished with +disk-unenforced", r.State, r.Isolation)
	}
}

// TestDispatch_SupervisorKilledUnmountsQuota: kill -9 of the supervisor of a quota'd dispatch
// leaves its tmpfs mounted; the reaper unmounts it and removes the stage's work.
func TestDispatch_SupervisorKilledUnmountsQuota(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	// The supervisor is another process: it reads the target from agora.yaml.
	if err := os.WriteFile(filepath.Join(e.home.Dir, config.FileName), []byte("targets:\n  local:\n    disk: 100MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := "sleep 1000." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	e.subagent("long", "head -c 1000000 /dev/zero > f; "+marker)
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
	sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	deadline := time.Now().Add(30 * time.Second)
	for !processWithArg(marker) {
		if time.Now().After(deadline) {
			cur, _ := e.d.Records.Get(t.Context(), r.ID)
			t.Fatalf("the agent never started: %s %s %s", cur.State, cur.Reason, cur.Detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The quota, and the pinned content's tmpfs the bundle and capability files are on.
	if m := agoratest.MountsUnder(t, stage); len(m) != 2 {
		t.Fatalf("mounts under the stage of a running quota'd dispatch: %v, want the quota's and the pinned content's", m)
	}
	sup.Process.Kill()
	sup.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for processWithArg(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent (%s) outlived its killed supervisor", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := agoratest.MountsUnder(t, stage); len(m) != 2 {
		t.Fatalf("before the reap: mounts %v, want both still mounted (nobody unmounted them)", m)
	}
	n, err := e.d.Reap(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	if m := agoratest.MountsUnder(t, stage); len(m) > 0 {
		t.Errorf("after the reap: mounts %v left under the stage", m)
	}
	ents, _ := os.ReadDir(stage)
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), ".log") {
			t.Errorf("after the reap the stage still holds %s", ent.Name())
		}
	}
	cur, _ := e.d.Records.Get(t.Context(), r.ID)
	if cur.State != lifecycle.DispatchFailed || cur.Reason != lifecycle.ReasonLost {
		t.Errorf("after reap: %s %s, want failed lost", cur.State, cur.Reason)
	}
}

// TestDispatch_StagingStaysPrivate: as root the sandbox user reaches its staging only
// through the sandbox: AGORA_HOME stays 0700 root, and nothing of the stage is reachable
// from the host by that uid.
func TestDispatch_StagingStaysPrivate(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	fi, err := os.Stat(e.home.Dir)
	if err != nil {
		t.Fatal(err)
	}
	e.subagent("look", fmt.Sprintf(`ls %s >/dev/null 2>&1 && echo home=reachable || echo home=blocked; id -u`, e.home.Dir))
	r := e.run(dispatch.Request{Subagent: "look"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	after, err := os.Stat(e.home.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 || after.Mode() != fi.Mode() {
		t.Errorf("AGORA_HOME mode %v before, %v after; want 0700 throughout", fi.Mode(), after.Mode())
	}
	if out := e.stdout(r); !strings.Contains(out, "home=blocked") || !strings.Contains(out, "65534") {
		t.Errorf("probe output:\n%s", out)
	}
}
