package dispatch_test

// Attacks on the stage of a root agora with a disk quota: the agent against its read-only
// bundle and capability files from its writable workspace and out directory, and `disk:` as
// the agent's own room, which the host's staging must not take (a capability larger than the
// quota, or with more files than its inode cap, still runs; a repository cannot squeeze the
// capability files out). Each test is an attack; its comment says what must hold.

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// crossMountProbe is run by the agent: from the writable workspace and out directory it
// tries to reach the read-only bundle and capability files on the same tmpfs (hard links,
// renames, /proc/self/fd reopen and linkat, dirfd-relative opens, chmod, unlink, a remount
// in a user namespace of its own). Every attempt prints "held NAME ERRNO" or "BREACH NAME".
// It ends with what the files hold, and the mount options of /agora/bundle and
// /agora/capabilities.
const crossMountProbe = `command -v python3 >/dev/null || { echo NOPY; exit 0; }
python3 - <<'EOF'
import os, errno, ctypes, sys
B = "/agora/bundle/manifest.json"
C = "/agora/capabilities/qtools/tool.txt"
def tryit(name, f):
    try:
        f()
        print("BREACH", name)
    except OSError as e:
        print("held", name, errno.errorcode.get(e.errno, e.errno))
fd = os.open(B, os.O_RDONLY)
cfd = os.open(C, os.O_RDONLY)
dfd = os.open("/agora/bundle", os.O_RDONLY | os.O_DIRECTORY)
tryit("link-bundle-ws", lambda: os.link(B, "/agora/workspace/l1"))
tryit("link-bundle-out", lambda: os.link(B, "/agora/out/l1"))
tryit("link-cap-ws", lambda: os.link(C, "/agora/workspace/l2"))
tryit("link-cap-out", lambda: os.link(C, "/agora/out/l2"))
tryit("linkat-procfd-bundle", lambda: os.link("/proc/self/fd/%d" % fd, "/agora/workspace/l3", follow_symlinks=True))
tryit("linkat-procfd-cap", lambda: os.link("/proc/self/fd/%d" % cfd, "/agora/out/l4", follow_symlinks=True))
tryit("link-ws-into-bundle", lambda: (open("/agora/workspace/mine", "w").close(), os.link("/agora/workspace/mine", "/agora/bundle/mine")))
tryit("rename-bundle-ws", lambda: os.rename(B, "/agora/workspace/r1"))
tryit("rename-cap-out", lambda: os.rename(C, "/agora/out/r2"))
tryit("rename-ws-over-bundle", lambda: (open("/agora/workspace/fake", "w").close(), os.rename("/agora/workspace/fake", B)))
tryit("rename-bundle-dir", lambda: os.rename("/agora/bundle", "/agora/workspace/bundle"))
tryit("reopen-procfd-rw", lambda: os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)))
tryit("reopen-procfd-cap-rw", lambda: os.close(os.open("/proc/self/fd/%d" % cfd, os.O_WRONLY | os.O_TRUNC)))
tryit("open-rw", lambda: os.close(os.open(B, os.O_WRONLY | os.O_APPEND)))
tryit("openat-dirfd-create", lambda: os.close(os.open("planted", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd)))
tryit("openat-dirfd-dotdot", lambda: os.close(os.open("../bundle/manifest.json", os.O_WRONLY | os.O_APPEND, dir_fd=os.open("/agora/workspace", os.O_RDONLY | os.O_DIRECTORY))))
tryit("chmod-bundle", lambda: os.chmod(B, 0o666))
tryit("chmod-cap", lambda: os.chmod(C, 0o666))
tryit("utime-cap", lambda: os.utime(C, (0, 0)))
tryit("unlink-bundle", lambda: os.unlink(B))
tryit("unlink-cap", lambda: os.unlink(C))
tryit("mkdir-bundle", lambda: os.mkdir("/agora/bundle/x"))
tryit("truncate-cap", lambda: os.truncate(C, 0))
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
    MS_REMOUNT, MS_BIND = 32, 4096
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        print("held unshare", errno.errorcode.get(ctypes.get_errno()))
        sys.stdout.flush()
        os._exit(0)
    for p in ("/agora/bundle", "/agora/capabilities"):
        if libc.mount(None, p.encode(), None, MS_REMOUNT | MS_BIND, None) == 0:
            print("remounted", p)
        else:
            print("held remount", p, errno.errorcode.get(ctypes.get_errno()))
    def w():
        with open(B, "a") as f:
            f.write("x")
    tryit("write-after-remount-bundle", w)
    sys.stdout.flush()
    os._exit(0)
os.waitpid(pid, 0)
print("exists", sorted(n for n in ("l1", "l2", "l3", "l4", "r1", "r2", "bundle") if os.path.lexists("/agora/workspace/" + n) or os.path.lexists("/agora/out/" + n)))
print("captool=" + open(C).read().strip())
print("manifest-ok=" + str(os.path.getsize(B) > 0 and open(B).read().startswith("{")))
for l in open("/proc/self/mountinfo"):
    f = l.split()
    if f[4] in ("/agora/bundle", "/agora/capabilities", "/agora/workspace", "/agora/out"):
        print("mnt", f[4], "root=" + f[3], "opts=" + f[5], "src=" + f[f.index("-") + 2])
EOF`

// TestStageQuotaAttack_CrossMountFromSandbox: the bundle and capability files are the sandbox
// uid's, and the workspace and out directory beside them writable. The agent must still not
// link, rename, reopen, chmod or remount its way to changing them: every attempt fails (EXDEV
// across the binds, EROFS on them), the files read as staged afterwards, and the mount table
// shows both read-only and the workspace and out directory on the quota.
func TestStageQuotaAttack_CrossMountFromSandbox(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	crossMountRun(t, e, e.run)
}

func crossMountRun(t *testing.T, e *env, run func(dispatch.Request) *dispatch.Record) *dispatch.Record {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("SKIP: python3 is not installed: the probe needs it")
	}
	e.capability("qtools", "commands: [\"sh -c *\"]\n", map[string]string{"tool.txt": "orig\n"})
	if err := e.subagentWith("prober", crossMountProbe, "shell", "qtools"); err != nil {
		t.Fatal(err)
	}
	r := run(dispatch.Request{Subagent: "prober"})
	out := e.stdout(r)
	t.Logf("dispatch %s %s %s, isolation %s:\n%s", r.ID, r.State, r.Reason, r.Isolation, out)
	if strings.Contains(out, "NOPY") {
		t.Skip("SKIP: python3 is not in the sandbox")
	}
	wantFinished(t, r)
	if !strings.Contains(r.Isolation, "disk-quota") {
		t.Fatalf("isolation %q: no disk quota, the attack is not the one meant", r.Isolation)
	}
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "BREACH") || strings.HasPrefix(l, "remounted") {
			t.Errorf("the agent reached the read-only stage: %s", strings.TrimSpace(l))
		}
	}
	for _, want := range []string{"held link-bundle-ws EXDEV", "held linkat-procfd-bundle EXDEV", "held link-cap-out EXDEV",
		"exists []", "captool=orig", "manifest-ok=True", "held "} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the probe's output", want)
		}
	}
	if !strings.Contains(out, "held unshare") && !strings.Contains(out, "held remount /agora/bundle") {
		t.Errorf("the user-namespace remount attempt did not report")
	}
	var mnts int
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != "mnt" {
			continue
		}
		mnts++
		ro := strings.HasPrefix(f[3], "opts=ro")
		if (f[1] == "/agora/bundle" || f[1] == "/agora/capabilities") != ro {
			t.Errorf("mount %s has %s", f[1], f[3])
		}
		if (f[1] == "/agora/workspace" || f[1] == "/agora/out") && !strings.HasPrefix(f[4], "src=agora-") {
			t.Errorf("mount %s is not on the quota: %s", f[1], f[4])
		}
	}
	if mnts != 4 {
		t.Errorf("want the 4 /agora places in the mount table, got %d", mnts)
	}
	if p := e.patch(r); strings.Contains(p, "l1") || strings.Contains(p, "manifest") {
		t.Errorf("the patch carries a link into the bundle:\n%s", p)
	}
	return r
}

// TestStageQuotaAttack_CrossMountFromWarmSlot: the same probe in a warm slot's stage.
func TestStageQuotaAttack_CrossMountFromWarmSlot(t *testing.T) {
	requireRootLimits(t)
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	// The first dispatch teaches the pool its shape; the second claims the slot.
	cold := crossMountRun(t, e, e.run)
	waitWarmReady(t, w, 1)
	hot := crossMountRun(t, e, func(req dispatch.Request) *dispatch.Record {
		r := e.run(req)
		if c := warmCounts(w); c.Claimed != 1 {
			t.Fatalf("counts %+v: the dispatch did not run in the slot", c)
		}
		return r
	})
	// Close waits out the slots' teardowns: the claimed slot's and the refilled one's
	// quotas (with the bundle and capability files on them) must all be gone.
	w.Close()
	stageLeftovers(t, e, cold.ID)
	stageLeftovers(t, e, hot.ID)
	if m := agoratest.MountsUnder(t, e.d.StateDir); len(m) != 0 {
		t.Errorf("mounts left under the dispatches directory after the pools closed: %v", m)
	}
	filepath.WalkDir(e.d.StateDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == "bundle" || d.Name() == "capabilities" || d.Name() == "workspace") {
			t.Errorf("left after the pools closed: %s", p)
		}
		return nil
	})
}

// incompressible returns n bytes no archive shrinks, the same every run.
func incompressible(n int) string {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26 // text, so the catalog stores it as a plain file
	}
	return string(b)
}

// TestStageQuotaAttack_CapabilityFilesOverQuotaReported: the bundle holds each capability's
// stored content and the capability files lay it out again. A capability of 600 KiB on a
// 1 MiB quota (the least agora.yaml takes) runs: `disk:` is the agent's room, not the
// staging's. A stage that put them on the quota would have to end such a dispatch as the
// quota's doing (limit-exceeded, naming the target's disk), never as tampered content
// (integrity-failed) or an internal error.
func TestStageQuotaAttack_CapabilityFilesOverQuotaReported(t *testing.T) {
	quotaSpared(t, config.MinDisk, "bigtools", map[string]string{"data.txt": incompressible(600 << 10)})
}

// TestStageQuotaAttack_BundleOverQuotaReported: as above with a capability larger than the
// quota itself, whose bundle alone would not fit on it.
func TestStageQuotaAttack_BundleOverQuotaReported(t *testing.T) {
	quotaSpared(t, config.MinDisk, "hugetools", map[string]string{"data.txt": incompressible(1200 << 10)})
}

// quotaSpared dispatches a subagent of one capability of files on a target whose disk is
// disk bytes: it must finish, or at worst end limit-exceeded naming the target's disk, and
// leave nothing of its stage but the logs.
func quotaSpared(t *testing.T, disk config.ByteSize, capability string, files map[string]string) {
	t.Helper()
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = disk })
	e.capability(capability, "commands: [\"sh -c *\"]\n", files)
	if err := e.subagentWith("sub", "echo ran", "shell", capability); err != nil {
		t.Fatal(err)
	}
	r := e.run(dispatch.Request{Subagent: "sub"})
	t.Logf("dispatch %s %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	if r.State != lifecycle.DispatchFinished &&
		(r.Reason != lifecycle.ReasonLimitExceeded || !strings.Contains(r.Detail, "targets."+config.DefaultTarget+".disk")) {
		t.Errorf("capability %s on a %s quota ended the dispatch %s %s %q, neither finished nor limit-exceeded naming targets.%s.disk",
			capability, disk, r.State, r.Reason, r.Detail, config.DefaultTarget)
	}
	stageLeftovers(t, e, r.ID)
}

// stageLeftovers fails when dispatch id's stage still holds anything but its logs: a mount,
// the quota's mount point, or a bundle, capabilities, workspace or out directory in either
// layout.
func stageLeftovers(t *testing.T, e *env, id string) {
	t.Helper()
	dir := filepath.Join(e.d.StateDir, id)
	if m := agoratest.MountsUnder(t, dir); len(m) != 0 {
		t.Errorf("mounts left under the stage: %v", m)
	}
	for _, n := range []string{"disk", "pinned", "bundle", "capabilities", "workspace", "out", "inputs"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			t.Errorf("the stage kept %s after the end", n)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.d.StateDir, ".held", id)); err == nil {
		t.Errorf("the stage is still in the held index")
	}
}

// TestStageQuotaAttack_TeardownLeavesNothing: a dispatch that ends normally, one that fills
// the quota's bytes and one that fills its inodes (before the host collects out/ and
// unmounts) leave no mount, no bundle or capability directory in either layout, and no held
// entry; the fillers end limit-exceeded.
func TestStageQuotaAttack_TeardownLeavesNothing(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 4 << 20 })
	e.capability("qtools", "commands: [\"sh -c *\"]\n", map[string]string{"tool.txt": "orig\n"})
	for name, script := range map[string]string{
		"plain":  `echo '{"forged": true}' > /agora/out/note; echo ok`,
		"bytes":  `head -c 8388608 /dev/zero > /agora/workspace/fill; echo filled`,
		"inodes": `mkdir /agora/out/i && cd /agora/out/i && i=0; while : > f$i 2>/dev/null; do i=$((i+1)); done; echo "inodes=$i"`,
	} {
		if err := e.subagentWith(name, script, "shell", "qtools"); err != nil {
			t.Fatal(err)
		}
		r := e.run(dispatch.Request{Subagent: name})
		t.Logf("%s: dispatch %s %s %s %q", name, r.ID, r.State, r.Reason, r.Detail)
		switch name {
		case "plain":
			wantFinished(t, r)
		default:
			if r.Reason != lifecycle.ReasonLimitExceeded {
				t.Errorf("%s: a filled quota ended %s %s %q, want limit-exceeded", name, r.State, r.Reason, r.Detail)
			}
		}
		stageLeftovers(t, e, r.ID)
	}
}

// TestStageQuotaAttack_CapabilityInodesOverQuotaReported: a capability may hold up to
// catalog.DefaultMaxFiles files, more than a 16 MiB quota's inode cap (4096). One of 5000
// small files runs; were its files on the quota, the dispatch would have to end as the
// quota's doing, not integrity-failed.
func TestStageQuotaAttack_CapabilityInodesOverQuotaReported(t *testing.T) {
	files := map[string]string{}
	for i := range 5000 {
		files[filepath.Join("d"+strconv.Itoa(i%50), "f"+strconv.Itoa(i))] = "x\n"
	}
	quotaSpared(t, 16<<20, "manytools", files)
}

// TestStageQuotaAttack_RepoSqueezesCapabilityFiles: the repository is the attacker's. Its
// checkout (written after the bundle and before the capability files) leaves just too little
// of a 1 MiB quota for a 150 KiB capability's files. The capability files must not be what
// runs out of room, nor may the dispatch end integrity-failed (a verdict that blames agora's
// own pinned content, which the repository's author could then trigger at will).
func TestStageQuotaAttack_RepoSqueezesCapabilityFiles(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = config.MinDisk })
	e.capability("midtools", "commands: [\"sh -c *\"]\n", map[string]string{"data.txt": incompressible(150 << 10)})
	if err := e.subagentWith("mid", "echo ran", "shell", "midtools"); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 340<<10)
	rand.New(rand.NewSource(7)).Read(blob)
	repo := gitRepo(t, map[string]string{"blob.bin": string(blob)})
	r := e.run(dispatch.Request{Subagent: "mid", Repo: repo})
	t.Logf("dispatch %s %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	if r.State == lifecycle.DispatchFinished {
		return
	}
	if r.Reason != lifecycle.ReasonLimitExceeded || !strings.Contains(r.Detail, "targets."+config.DefaultTarget+".disk") {
		t.Errorf("a repository that squeezed the quota ended the dispatch %s %s %q, not limit-exceeded naming targets.%s.disk",
			r.State, r.Reason, r.Detail, config.DefaultTarget)
	}
	stageLeftovers(t, e, r.ID)
}
