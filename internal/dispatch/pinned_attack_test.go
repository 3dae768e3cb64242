package dispatch_test

// Attacks on ADR 0034: a root agora's pinned content (the bundle and the capability files) on
// a tmpfs of the dispatch's own at AGORA_HOME/dispatches/<id>/pinned (agora-pinned-<id>,
// 128 MiB, 33792 inodes) when its stored size is 8 MiB or less. Each test is an attack; its
// comment says what must hold.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// mountTable is what the agent prints of its mount table: every line naming /agora/bundle or
// /agora/capabilities, framed so the test finds them in stdout.
const mountTable = `echo MT-BEGIN; while read -r l; do case "$l" in *" /agora/bundle "*|*" /agora/capabilities "*) echo "$l";; esac; done < /proc/self/mountinfo; echo MT-END`

// pinnedMounts parses mountTable's output: mount point -> (root within its fs, fs type,
// source, super options).
func pinnedMounts(out string) map[string][4]string {
	m := map[string][4]string{}
	in := false
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		switch {
		case l == "MT-BEGIN":
			in = true
			continue
		case l == "MT-END":
			in = false
		}
		if !in {
			continue
		}
		f := strings.Fields(l)
		i := -1
		for j, s := range f {
			if s == "-" {
				i = j
				break
			}
		}
		if len(f) < 5 || i < 0 || len(f) < i+4 {
			continue
		}
		m[f[4]] = [4]string{f[3], f[i+1], f[i+2], f[i+3]}
	}
	return m
}

// waitMounts polls until dir has want mounts under it, or fails after 30 s.
func waitMounts(t *testing.T, dir string, want int) []string {
	t.Helper()
	var m []string
	agoratest.Eventually(t, 30*time.Second, fmt.Sprintf("%d mounts under %s", want, dir), func() error {
		if m = agoratest.MountsUnder(t, dir); len(m) != want {
			return fmt.Errorf("mounts %v", m)
		}
		return nil
	})
	return m
}

// agentRuns waits until a process whose arguments hold marker runs (want) or no longer does:
// another process's state, which no event of this test's announces.
func agentRuns(t *testing.T, marker string, want bool) {
	t.Helper()
	agoratest.Eventually(t, 30*time.Second, fmt.Sprintf("the agent %q running: %v", marker, want), func() error {
		if processWithArg(marker) != want {
			return errors.New("not yet")
		}
		return nil
	})
}

// shmCapability is e.capability with its source directory on /dev/shm (a tmpfs, when there is
// one): tens of thousands of files and directories made and deleted on ext4 take most of a
// test's time.
func shmCapability(t *testing.T, e *env, name, yaml string, files map[string]string) {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "agora-pinned-attack-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	made := map[string]bool{}
	all := map[string]string{"capability.yaml": yaml}
	for p, s := range files {
		all[p] = s
	}
	for p, s := range all {
		full := filepath.Join(dir, p)
		if d := filepath.Dir(full); !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			made[d] = true
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := e.w.PrepareCapability(name, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", pc); err != nil {
		t.Fatal(err)
	}
}

// capabilitySize is the stored size of the latest version of capability name.
func capabilitySize(t *testing.T, e *env, name string) int64 {
	t.Helper()
	var n int64
	if err := e.home.DB.SQL().QueryRow(`SELECT v.size FROM catalog_heads h JOIN catalog_versions v
ON v.kind = h.kind AND v.name = h.name AND v.digest = h.digest WHERE h.kind = 'capability' AND h.name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPinnedAttack_ManyFilesUnderThreshold: a capability at the catalog's file cap (9999
// empty files and capability.yaml, in 100 directories, about 5 MiB stored) goes on the pinned
// tmpfs and runs: the agent sees every file, /agora/capabilities and /agora/bundle are on
// agora-pinned-<id> read-only, and nothing is left after the end.
func TestPinnedAttack_ManyFilesUnderThreshold(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	files := map[string]string{}
	for i := range 9999 {
		files["d"+strconv.Itoa(i%100)+"/f"+strconv.Itoa(i)] = ""
	}
	shmCapability(t, e, "manytools", "commands: [\"sh -c *\"]\n", files)
	script := `n=0; for d in /agora/capabilities/manytools/d*; do for f in "$d"/*; do n=$((n+1)); done; done; echo "files=$n"; ` + mountTable
	if err := e.subagentWith("many", script, "shell", "manytools"); err != nil {
		t.Fatal(err)
	}
	t.Logf("stored size of manytools: %d bytes", capabilitySize(t, e, "manytools"))
	r := e.run(dispatch.Request{Subagent: "many"})
	wantFinished(t, r)
	out := e.stdout(r)
	if !strings.Contains(out, "files=9999") {
		t.Errorf("the agent did not see all 9999 files:\n%.300s", out)
	}
	m := pinnedMounts(out)
	for _, p := range []string{"/agora/bundle", "/agora/capabilities"} {
		if m[p][1] != "tmpfs" || m[p][2] != "agora-pinned-"+r.ID {
			t.Errorf("%s is on %v, want the pinned tmpfs agora-pinned-%s", p, m[p], r.ID)
		}
	}
	stageLeftovers(t, e, r.ID)
}

// TestPinnedAttack_ThresholdEdges: pinned content just over 8 MiB stays on the stage
// directory's filesystem and runs; content just under goes on the pinned tmpfs and runs. The
// 128 MiB tmpfs is never what a dispatch under the threshold meets: the under-threshold
// capability is one incompressible file (the bundle holds it twice over: archive and layout).
func TestPinnedAttack_ThresholdEdges(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	for _, c := range []struct {
		name     string
		data     int
		onPinned bool
	}{
		{"over", 8<<20 + 1, false},
		{"under", 8<<20 - 64<<10, true},
	} {
		e.capability(c.name+"tools", "commands: [\"sh -c *\"]\n", map[string]string{"data.txt": incompressible(c.data)})
		if err := e.subagentWith(c.name, `wc -c < /agora/capabilities/`+c.name+`tools/data.txt; `+mountTable, "shell", c.name+"tools"); err != nil {
			t.Fatal(err)
		}
		size := capabilitySize(t, e, c.name+"tools")
		r := e.run(dispatch.Request{Subagent: c.name})
		t.Logf("%s: stored %d bytes, dispatch %s %s %s", c.name, size, r.ID, r.State, r.Reason)
		wantFinished(t, r)
		out := e.stdout(r)
		if !strings.Contains(out, strconv.Itoa(c.data)) {
			t.Errorf("%s: the agent did not read all %d bytes:\n%.200s", c.name, c.data, out)
		}
		m := pinnedMounts(out)
		for _, p := range []string{"/agora/bundle", "/agora/capabilities"} {
			got := m[p][2] == "agora-pinned-"+r.ID
			if got != c.onPinned {
				t.Errorf("%s (stored %d): %s on %v, want on the pinned tmpfs: %v", c.name, size, p, m[p], c.onPinned)
			}
			if !strings.HasPrefix(m[p][0], "/") {
				t.Errorf("%s: no mount line for %s", c.name, p)
			}
		}
		stageLeftovers(t, e, r.ID)
	}
}

// TestPinnedAttack_StagingFailsAfterMount: the pinned tmpfs is mounted when the stage is made,
// before the workspace is cloned. A repository gone between acceptance and staging fails the
// staging after the mount; the stage must still end with nothing mounted, no pinned/ and no
// held entry.
func TestPinnedAttack_StagingFailsAfterMount(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	e.subagent("work", "echo ran")
	repo := gitRepo(t, map[string]string{"a.txt": "a\n"})
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "work", Repo: repo, Actor: "test", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	r, err = e.d.Supervise(t.Context(), r.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatch %s %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	if r.State == lifecycle.DispatchFinished {
		t.Fatalf("the clone of a removed repository succeeded: not the failure meant")
	}
	stageLeftovers(t, e, r.ID)
}

// TestPinnedAttack_CancelAndTimeout: a dispatch cancelled while its agent runs, and one that
// times out, each had both tmpfs mounted (the quota and the pinned content's) while running
// and end with neither, no pinned/ and no held entry.
func TestPinnedAttack_CancelAndTimeout(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	for _, how := range []string{"cancel", "timeout"} {
		marker := "sleep 1002." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
		e.subagent("long-"+how, marker)
		timeout := 30 * time.Second
		if how == "timeout" {
			timeout = 3 * time.Second
		}
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "long-" + how, Actor: "test", Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *dispatch.Record, 1)
		go func() {
			got, err := e.d.Supervise(context.Background(), r.ID, nil)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
		agentRuns(t, marker, true)
		m := agoratest.MountsUnder(t, stage)
		if len(m) != 2 || !strings.Contains(strings.Join(m, " "), "/pinned") {
			t.Errorf("%s: mounts under the running stage %v, want the quota and pinned/", how, m)
		}
		if how == "cancel" {
			if _, err := e.d.Cancel(t.Context(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
		var got *dispatch.Record
		select {
		case got = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: Supervise did not return", how)
		}
		t.Logf("%s: dispatch %s %s %s", how, r.ID, got.State, got.Reason)
		if lifecycle.DispatchEnded(got.State) && got.State == lifecycle.DispatchFinished {
			t.Errorf("%s: the dispatch finished", how)
		}
		stageLeftovers(t, e, r.ID)
	}
}

// TestPinnedAttack_KilledSupervisorReaped: the supervisor of a running dispatch (its quota
// and pinned tmpfs mounted) is killed with -9; Reap must unmount both, remove pinned/ and
// take the stage out of the held index, and a second Reap finds nothing to do.
func TestPinnedAttack_KilledSupervisorReaped(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home.Dir, config.FileName), []byte("targets:\n  local:\n    disk: 16MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := "sleep 1003." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	e.subagent("long", marker)
	r, sup := startDetachedSupervisor(t, e, dispatch.Request{Subagent: "long", Timeout: time.Minute})
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	agentRuns(t, marker, true)
	waitMounts(t, stage, 2)
	sup.Process.Kill()
	sup.Wait()
	agentRuns(t, marker, false) // it dies with its killed supervisor
	if _, err := os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID)); err != nil {
		t.Fatalf("the killed supervisor's stage is not held: %v", err)
	}
	if n, err := e.d.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	stageLeftovers(t, e, r.ID)
	if n, err := e.d.Reap(t.Context()); err != nil || n != 0 {
		t.Errorf("second Reap = %d, %v; want 0", n, err)
	}
}

// recordingProvider is an outliving provider that keeps the binds of the spec it adopts.
type recordingProvider struct {
	*outliving
	mu    sync.Mutex
	binds []compute.Bind
}

func (p *recordingProvider) Adopt(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	p.mu.Lock()
	p.binds = append([]compute.Bind(nil), s.Binds...)
	p.mu.Unlock()
	return p.outliving.Adopt(ctx, s)
}

// TestPinnedAttack_AdoptionFindsPinnedBundle: a dispatch whose supervisor died while its
// worker runs on is adopted; its bundle and capability files are on the pinned tmpfs. The
// adopter must bind them from there (not from the stage directory, where they are not), the
// dispatch must end by its worker (not lost: "its stage is gone"), and the end must leave
// nothing mounted, no pinned/ and no held entry.
func TestPinnedAttack_AdoptionFindsPinnedBundle(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	base := &outliving{end: make(chan struct{})}
	r := orphan(t, e, base)
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	if m := agoratest.MountsUnder(t, stage); len(m) != 2 {
		t.Fatalf("mounts under the orphan's stage %v, want the quota and pinned/", m)
	}
	p := &recordingProvider{outliving: base}
	e.d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) { return p, nil }
	adopter := *e.d
	adopter.Adopt = &dispatch.Adoption{Role: "serve"}
	if _, err := adopter.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := adoptedEntries(t, e, r.ID); n != 1 {
		t.Fatalf("%d dispatch.adopted entries, want 1", n)
	}
	close(base.end)
	adopter.Adopt.Wait() // the adoption runs in the background: Adopt is called there
	p.mu.Lock()
	binds := p.binds
	p.mu.Unlock()
	var bundle, caps string
	for _, b := range binds {
		switch b.Dst {
		case "/agora/bundle":
			bundle = b.Src
		case "/agora/capabilities":
			caps = b.Src
		}
	}
	if bundle != filepath.Join(stage, "pinned", "bundle") || caps != filepath.Join(stage, "pinned", "capabilities") {
		t.Errorf("the adopted spec binds /agora/bundle from %q and /agora/capabilities from %q, want pinned/", bundle, caps)
	}
	cur, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != lifecycle.DispatchFailed || cur.Reason != lifecycle.ReasonWorkerFailed {
		t.Errorf("adopted dispatch ended %s/%s (%s), want failed/worker-failed", cur.State, cur.Reason, cur.Detail)
	}
	stageLeftovers(t, e, r.ID)
}

// TestPinnedAttack_CrossMountFromSandbox: the agent against its pinned content on its own
// tmpfs: every link, rename, reopen, chmod or remount attempt fails (crossMountRun), both binds
// are read-only, nosuid and nodev, and what the mount table tells of them is the tmpfs and its
// name (the dispatch's own id) and its size caps: no host path (the root of each bind within
// its filesystem is /bundle or /capabilities).
func TestPinnedAttack_CrossMountFromSandbox(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	r := crossMountRun(t, e, e.run)
	out := e.stdout(r)
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != "mnt" || (f[1] != "/agora/bundle" && f[1] != "/agora/capabilities") {
			continue
		}
		if f[4] != "src=agora-pinned-"+r.ID {
			t.Errorf("%s is on %s, want agora-pinned-%s", f[1], f[4], r.ID)
		}
		if want := "root=/" + filepath.Base(f[1]); f[2] != want {
			t.Errorf("%s: %s, want %s (no host path)", f[1], f[2], want)
		}
		for _, o := range []string{"ro", "nosuid", "nodev"} {
			if !strings.Contains(","+strings.TrimPrefix(f[3], "opts=")+",", ","+o+",") {
				t.Errorf("%s: mount options %s lack %s", f[1], f[3], o)
			}
		}
		if strings.Contains(l, e.home.Dir) {
			t.Errorf("the mount table names AGORA_HOME: %s", l)
		}
	}
	stageLeftovers(t, e, r.ID)
}

// TestPinnedAttack_BackgroundTeardownsSeveral: the resident's background teardowns of three
// dispatches in a row: once waited, none leaves a mount, pinned/ or a held entry.
func TestPinnedAttack_BackgroundTeardownsSeveral(t *testing.T) {
	requireRootLimits(t)
	e := newEnvYAML(t, "targets:\n  local:\n    disk: 16MiB\n")
	e.subagent("hi", "echo hi")
	wait := e.d.BackgroundTeardowns()
	var ids []string
	for range 3 {
		r := e.run(dispatch.Request{Subagent: "hi"})
		wantFinished(t, r)
		ids = append(ids, r.ID)
	}
	wait()
	for _, id := range ids {
		stageLeftovers(t, e, id)
	}
	if m := agoratest.MountsUnder(t, e.d.StateDir); len(m) != 0 {
		t.Errorf("mounts left under the dispatches directory: %v", m)
	}
}
