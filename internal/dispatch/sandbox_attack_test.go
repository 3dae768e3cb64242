package dispatch_test

// Attacks on the sandbox itself, kept as regression tests:
// each comment says the attack; the assertions check that it is refused
// (read-only root and /etc, sized scratch, one uid per dispatch, memory-per-process said).

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// tmpfsHoarder writes 16 files of 64 MiB (each under file_size) into each of the three
// writable tmpfs a sandbox has besides the quota (/tmp, /dev/shm on bwrap's /dev tmpfs, and
// bwrap's root tmpfs, "/", which the sandbox uid owns), then reports, while it still holds
// them, what df says those file systems use, in KiB.
const tmpfsHoarder = `for d in /tmp /dev/shm /hoard; do
  mkdir -p $d
  i=0; while [ $i -lt 16 ]; do head -c 67108864 /dev/zero > $d/f$i || break; i=$((i+1)); done
done
echo "held_kib=$(df -k --output=used /tmp /dev / | awk 'NR>1 {s+=$1} END {print s}')"`

// TestRedTeam3_TmpfsEscapesMemoryAndDiskLimits
//
// Attack: a hostile exec agent (or a hostile repository's build it runs) writes its data
// into /tmp, /dev/shm or any new directory at / instead of the workspace. Those are three
// tmpfs that bwrap mounts (--tmpfs /tmp, --dev /dev, and its own root) without a size=: each
// may grow to half the host's RAM (12 GiB here) with millions of inodes, while the disk
// quota covers only the workspace and /agora/out, and RLIMIT_AS (the target's memory:)
// never counts page-cache pages of a tmpfs. file_size caps one file, not how many.
//
// Impact: with memory: 1GiB and disk: 32MiB the agent holds 3 GiB of host memory and the
// dispatch still finishes (no limit-exceeded, isolation claims +disk-quota); three such
// file systems per sandbox, times concurrent dispatches, exhaust the host's RAM (no swap:
// the OOM killer takes host processes, agora's supervisors and gateways included). The
// README's "the workspace and /agora/out as the only writable places" is not true.
//
// Fix: give every tmpfs the sandbox can write a size (and nr_inodes) charged to the same
// budget: mount /tmp (and /dev/shm) from the quota (bind a tmp/ directory of the disk tmpfs
// at /tmp, --size for --tmpfs in bwrap >= 0.10, or --perms/--remount-ro for /dev and /),
// make bwrap's root read-only (--remount-ro /), and where a cgroup is delegated rely on
// memory.max, which charges shmem; say memory-unenforced in isolation otherwise.
func TestRedTeam3_TmpfsEscapesMemoryAndDiskLimits(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.setTarget(func(tg *config.Target) { tg.Disk = 32 << 20; tg.Memory = 1 << 30 })
	e.subagent("hoarder", tmpfsHoarder)
	r := e.run(dispatch.Request{Subagent: "hoarder", Timeout: 2 * time.Minute})
	out := e.stdout(r)
	i := strings.Index(out, "held_kib=")
	if i < 0 {
		t.Fatalf("dispatch %s %s (%s): the agent did not report:\n%s", r.State, r.Reason, r.Detail, out)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(out[i+len("held_kib="):]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatch %s %s, isolation %s: the agent held %d MiB outside the 32 MiB quota under memory: 1GiB", r.State, r.Reason, r.Isolation, kib>>10)
	if limit := int64(1<<30+32<<20) >> 10; kib > limit && r.Reason != lifecycle.ReasonLimitExceeded {
		t.Errorf("the agent held %d MiB of host memory on the sandbox's own tmpfs, over memory (1 GiB) + disk (32 MiB), and the dispatch ended %s %q",
			kib>>10, r.State, r.Reason)
	}
}

// asHoarder starts 6 python processes that each keep 250 MiB resident (each far under the
// 1 GiB RLIMIT_AS), waits until all of them hold it, reports how much memory the sandbox's
// processes hold together (from /proc), and ends them. 1.5 GiB in all is over the limit as
// 4.2 GiB was, at a third of the page faults (on a machine whose faults are slow that version
// outlived its dispatch's timeout). Less than 1 GiB of memory: is too small for the worker.
const asHoarder = `pids=""; i=0; while [ $i -lt 6 ]; do
  python3 -c 'import os, time; b = bytearray(250 << 20); b[::4096] = b"x" * len(b[::4096]); open("/tmp/held.%d" % os.getpid(), "w").close(); time.sleep(60)' &
  pids="$pids $!"; i=$((i+1))
done
n=0; while [ $(ls /tmp/held.* 2>/dev/null | wc -l) -lt 6 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
echo "rss_kib=$(cat /proc/[0-9]*/status 2>/dev/null | awk '/^VmRSS/ {s+=$2} END {print s}')"
kill $pids; wait`

// TestRedTeam3_MemoryLimitIsPerProcess
//
// Attack: a hostile exec agent splits its memory over several processes. The target's
// memory: is only RLIMIT_AS, which the kernel applies to each process's address space, and
// max_procs (256) allows many processes; without a delegated cgroup nothing caps their sum,
// and the record does not say so (isolation has nproc-unenforced for processes, but no
// memory-unenforced).
//
// Impact: with memory: 1GiB the sandbox holds 4 GiB of resident memory and finishes; up to
// max_procs x memory (256 GiB by default) in principle: the host's OOM killer, not agora,
// decides what dies.
//
// Fix: enforce memory per dispatch (cgroup v2 memory.max where delegated; otherwise scale
// RLIMIT_AS by max_procs in the docs, or refuse to claim a memory limit), and add a
// memory-unenforced isolation token and a doctor row when no memory.max applies.
func TestRedTeam3_MemoryLimitIsPerProcess(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	const memory = 1 << 30
	e.setTarget(func(tg *config.Target) { tg.Memory = memory })
	e.subagent("split", asHoarder)
	r := e.run(dispatch.Request{Subagent: "split", Timeout: 2 * time.Minute})
	out := e.stdout(r)
	i := strings.Index(out, "rss_kib=")
	if i < 0 {
		t.Fatalf("dispatch %s %s (%s): the agent did not report:\n%s", r.State, r.Reason, r.Detail, out)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(out[i+len("rss_kib="):]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatch %s %s (%s), isolation %s: %d MiB resident under memory: 1GiB", r.State, r.Reason, r.Detail, r.Isolation, kib>>10)
	// Where no memory.max applies the record must say memory bound each process only.
	if kib > memory>>10 && !strings.Contains(r.Isolation, "memory.max") && !strings.Contains(r.Isolation, "memory-per-process") {
		t.Errorf("the sandbox held %d MiB resident under memory: 1GiB; isolation %q claims no gap", kib>>10, r.Isolation)
	}
}

// inotifyHog opens inotify instances until the kernel refuses, says how many it got, and
// holds them while marker sleeps.
const inotifyHog = `python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while libc.inotify_init1(0) >= 0:
    fds.append(1)
print("hog=%d" % len(fds), flush=True)
os.execvp("sleep", ["sleep"] + sys.argv[1:])
' `

// inotifyProbe reports whether one inotify instance can be had.
const inotifyProbe = `python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print("probe=" + ("ok" if fd >= 0 else os.strerror(ctypes.get_errno())))
'`

// TestRedTeam3_SharedSandboxUIDInotifyExhaustion
//
// Attack: every dispatch of a target runs as the same host uid, and the kernel charges
// per-user counters (inotify instances and watches, message queue bytes, pending signals)
// to that host uid across all user namespaces: each sandbox's count also counts at the
// initial namespace against fs.inotify.max_user_instances (128). One hostile dispatch opens
// all 128 (a long `sleep` keeps them) and every other sandbox of the target, concurrent or
// later, gets EMFILE from inotify_init for as long as it runs.
//
// Impact: cross-dispatch denial of service through the shared sandbox uid: file watchers
// (node's fs.watch, which Claude Code and most JS tooling use, `tail -f`, test runners in
// watch mode, language servers) fail in every other dispatch of the target; the same holds
// for POSIX message queues (819200 bytes per user) and queued real-time signals.
//
// Fix: give each concurrent dispatch its own host uid (a pool: sandbox_uid .. sandbox_uid+N,
// leased per dispatch and recorded), which also removes the /tmp/agora-gw-* exception; or
// cap these counters per sandbox (a user namespace's ucount_max is settable only from its
// parent: /proc/sys/user/max_inotify_instances inside a namespace the provider owns).
func TestRedTeam3_SharedSandboxUIDInotifyExhaustion(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.subagent("probe", inotifyProbe)
	if out := e.stdout(e.run(dispatch.Request{Subagent: "probe"})); !strings.Contains(out, "probe=ok") {
		t.Skipf("SKIP: no inotify in a sandbox here:\n%s", out)
	}
	marker := "1002." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	e.subagent("hog", inotifyHog+marker)
	done := make(chan *dispatch.Record, 1)
	go func() { done <- e.run(dispatch.Request{Subagent: "hog", Timeout: time.Minute}) }()
	// The hog holds its instances once python has exec'd sleep.
	for deadline := time.Now().Add(30 * time.Second); !processWithArg("sleep\x00" + marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hog never started")
		}
	}
	victim := e.run(dispatch.Request{Subagent: "probe"})
	for _, pid := range processesWith(marker) {
		syscall.Kill(pid, syscall.SIGKILL) // ends the hog's dispatch
	}
	hog := <-done
	out := e.stdout(victim)
	t.Logf("hog: %s; victim: %s", strings.TrimSpace(e.stdout(hog)), strings.TrimSpace(out))
	if !strings.Contains(out, "probe=ok") {
		t.Errorf("another dispatch of the same target could not get one inotify instance while the hog ran: %s", strings.TrimSpace(out))
	}
}

// preloadForger is a shared object for /etc/ld.so.preload: in every dynamically linked
// program it does nothing, except in the worker's capture `git diff --cached --binary`,
// where it prints a patch of its own and exits 0 before git runs.
const preloadForger = `#include <fcntl.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void forge(void) {
	char buf[16384];
	int fd = open("/proc/self/cmdline", O_RDONLY);
	if (fd < 0) return;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) return;
	buf[n] = 0;
	int diff = 0, binary = 0;
	for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
		if (!strcmp(p, "diff")) diff = 1;
		if (!strcmp(p, "--binary")) binary = 1;
	}
	if (!diff || !binary) return;
	static const char patch[] = "diff --git a/FORGED b/FORGED\nnew file mode 100644\n--- /dev/null\n+++ b/FORGED\n"
		"@@ -0,0 +1 @@\n+written by the agent's ld.so.preload inside the worker's capture\n";
	write(1, patch, sizeof patch - 1);
	_exit(0);
}
`

// TestRedTeam3_EtcWritablePreloadRunsInCapture
//
// Attack: bwrap builds the sandbox's root on a tmpfs and creates /etc on it (to hold the
// read-only binds of passwd, group, hosts, ...) as the sandbox user, so /etc is a directory
// the agent owns and can add files to (so is /). A hostile exec agent (or a hostile
// repository's build it runs) writes /etc/ld.so.preload naming a shared object it carries.
// glibc's loader then runs that object in every dynamically linked program started in the
// sandbox afterwards, including the git the worker runs for capture, after its stop step
// has killed every process of the agent. Here the object turns the capture's
// `git diff --cached --binary` into a patch of its own; the worker hashes what git printed
// and declares it, so the host's hash check passes.
//
// Impact: agent code runs inside the worker's capture, after "nothing the agent started
// runs" (ARCHITECTURE.md); the stored patch, its digest in the record and the audit are the
// agent's, not the workspace's (the stored-patch attack again, by a new door; it could as well lie to the
// binary-secret masking's `git diff --numstat` or start a process that outlives the stop).
// The same writable /etc takes /etc/claude-code/managed-settings.json, which Claude Code
// reads whatever --setting-sources says (managed policy: permission rules, hooks).
//
// Fix: make the sandbox's root and /etc read-only once built (bwrap --remount-ro / after the
// binds, or build /etc from --ro-bind-data/--file and --perms 0555 --dir), and have the
// worker run git (and claude) with a fixed environment AND verify /etc/ld.so.preload does not
// exist (or run its own helpers from a statically linked binary); a test that walks /, /etc,
// /dev for writable entries as the sandbox user.
func TestRedTeam3_EtcWritablePreloadRunsInCapture(t *testing.T) {
	lib := buildPreload(t, preloadForger)
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"README.md": "# demo\n", "tools/fmt.so": string(lib)})
	// Now: / and /etc are read-only, the preload cannot be planted, and the real change is
	// what the patch carries.
	e.subagent("preloader", `cp tools/fmt.so /tmp/fmt.so; (echo /tmp/fmt.so > /etc/ld.so.preload) 2>/dev/null && echo planted; echo "the agent's real change" > real.txt`)
	r := e.run(dispatch.Request{Subagent: "preloader", Repo: repo, Timeout: time.Minute})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("dispatch %s %s: %s", r.State, r.Reason, r.Detail)
	}
	if r.Result.Patch == nil {
		t.Fatal("no patch")
	}
	patch := e.limitsBlob(r.Result.Patch)
	if strings.Contains(e.stdout(r), "planted") {
		t.Errorf("the agent wrote /etc/ld.so.preload")
	}
	if !strings.Contains(patch, "real.txt") {
		t.Errorf("the patch lacks the agent's real change:\n%s", patch)
	}
	if strings.Contains(patch, "written by the agent's ld.so.preload") {
		t.Errorf("dispatch %s finished with a patch written by the agent's code inside the worker's capture git (the real change real.txt is missing: %v):\n%s",
			r.ID, !strings.Contains(patch, "real.txt"), patch)
	}
}
