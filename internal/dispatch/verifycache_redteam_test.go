package dispatch_test

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// The gate's command comes from an
// untrusted patch and plan; the directory is the operator's. Each test is one attack.

// worldDir makes a directory outside every test temp dir's 0700 parents, so the sandbox
// user could reach a file there if the sandbox let it: a leak a test must see is then a
// leak of the sandbox, not a mode that happened to hide it.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "agora-redteam-vc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openCache is a cache directory whose modes never refuse a write (0777 directories, 0666
// files): only the read-only bind stands between the sandbox and its content.
func openCache(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(worldDir(t), "cache")
	for _, d := range []string{dir, filepath.Join(dir, "go-build"), filepath.Join(dir, "go-build", "ab")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"seen.txt": "warm\n", "go-build/ab/abcd-d": "object\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// snapshot is every entry below dir with its content and metadata (mode, owner, size, link
// count, mtime, ctime, xattrs): two equal snapshots mean nothing was changed, not even a
// timestamp or an attribute.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s mode=%o uid=%d gid=%d size=%d nlink=%d mtime=%d.%d ctime=%d.%d",
			strings.TrimPrefix(p, dir), st.Mode, st.Uid, st.Gid, st.Size, st.Nlink,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
		}
		if d.Type()&fs.ModeSymlink == 0 {
			buf := make([]byte, 4096)
			if n, err := unix.Llistxattr(p, buf); err == nil {
				line += " xattrs=" + strings.ReplaceAll(string(buf[:n]), "\x00", ",")
			}
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gateScript runs script as the verify command of a no-op agent's dispatch on e's default
// target and returns the verdict's output, failing unless the gate ran to a verdict.
func gateScript(t *testing.T, e *env, script string) string {
	t.Helper()
	r := e.run(dispatch.Request{Subagent: "noop", Repo: calcRepo(t), Verify: &verdict.Spec{Command: []string{"sh", "-c", script}}})
	if r.State != lifecycle.DispatchFinished || r.Verdict == nil {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished with a verdict", r.State, r.Reason, r.Detail, r.Verdict)
	}
	return r.Verdict.OutputTail
}

// brokeLines are the output's lines that announce an attack that worked.
func brokeLines(out string) []string {
	var broke []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "BROKE:") {
			broke = append(broke, l)
		}
	}
	return broke
}

// escapeScript tries every way we know, from inside the verify sandbox, to make the cache
// at $C writable or to change its content or metadata, and prints BROKE:<how> for each that
// succeeded. perl (in /usr, so in the sandbox) makes the raw calls sh has no command for.
const escapeScript = `C=$XDG_CACHE_HOME; export C
cat "$C/seen.txt" >/dev/null && echo READ-OK
mount -o remount,rw "$C" 2>/dev/null && echo BROKE:remount
mount -o remount,rw,bind "$C" 2>/dev/null && echo BROKE:remount-bind
mount -t tmpfs none "$C" 2>/dev/null && echo BROKE:overmount
unshare -m sh -c 'mount -o remount,rw,bind "$C" && echo x > "$C/seen.txt"' 2>/dev/null && echo BROKE:unshare-m
unshare -Ur sh -c 'echo x > "$C/seen.txt"' 2>/dev/null && echo BROKE:unshare-Ur
unshare -Urm sh -c 'mount -o remount,rw,bind "$C" && echo x > "$C/seen.txt"' 2>/dev/null && echo BROKE:unshare-Urm
unshare -Urm sh -c 'mount -o remount,rw "$C" && echo x > "$C/seen.txt"' 2>/dev/null && echo BROKE:unshare-Urm-plain
exec 3<"$C/seen.txt"
echo x 2>/dev/null >/proc/self/fd/3 && echo BROKE:proc-self-fd
echo x 2>/dev/null >>"/proc/$$/fd/3" && echo BROKE:proc-pid-fd
exec 3<&-
echo x 2>/dev/null >>"/proc/1/root$C/seen.txt" && echo BROKE:proc-1-root
echo x 2>/dev/null >>"/proc/self/root$C/seen.txt" && echo BROKE:proc-self-root
echo x 2>/dev/null >>"/proc/self/cwd/../../$C/seen.txt" && echo BROKE:proc-cwd
chmod 600 "$C/seen.txt" 2>/dev/null && echo BROKE:chmod
chmod 700 "$C/go-build" 2>/dev/null && echo BROKE:chmod-dir
chown "$(id -u)" "$C/seen.txt" 2>/dev/null && echo BROKE:chown
chgrp "$(id -g)" "$C/seen.txt" 2>/dev/null && echo BROKE:chgrp
touch -d 2001-01-01 "$C/seen.txt" 2>/dev/null && echo BROKE:utime
touch -m "$C/go-build/ab/abcd-d" 2>/dev/null && echo BROKE:touch
touch -a "$C/seen.txt" 2>/dev/null && echo BROKE:touch-atime
truncate -s 0 "$C/seen.txt" 2>/dev/null && echo BROKE:truncate
ln "$C/seen.txt" "$C/linked" 2>/dev/null && echo BROKE:hardlink-in-cache
echo x >/tmp/mine; ln /tmp/mine "$C/planted" 2>/dev/null && echo BROKE:hardlink-into-cache
ln -s /tmp/mine "$C/go-build/ab/sym" 2>/dev/null && echo BROKE:symlink
mkfifo "$C/fifo" 2>/dev/null && echo BROKE:mkfifo
mv "$C/go-build/ab/abcd-d" "$C/go-build/ab/abcd-x" 2>/dev/null && echo BROKE:rename
setxattr='my ($p, $n, $v) = ($ARGV[0], "user.poison", "v"); syscall(188, $p, $n, $v, 1, 0) == 0 and print "$ARGV[1]\n"'
perl -e "$setxattr" /tmp/mine XATTR-CALL-WORKS
perl -e "$setxattr" "$C/seen.txt" BROKE:setxattr
perl -e "$setxattr" "$C/go-build" BROKE:setxattr-dir
perl -e 'my ($s, $t, $f) = ("none", $ENV{C}, ""); syscall(165, $s, $t, $f, 32 | 4096, 0) == 0 and print "BROKE:mount-syscall\n"'
perl -e 'open(my $f, "+<", "$ENV{C}/seen.txt") and print "BROKE:open-rw\n"'
perl -e 'open(my $f, "<", "$ENV{C}/seen.txt") or exit; utime(1, 1, $f) and print "BROKE:futimes\n"; chmod(0600, $f) and print "BROKE:fchmod\n"'
perl -e 'use Fcntl; sysopen(my $f, "$ENV{C}/new", O_CREAT|O_WRONLY) and print "BROKE:creat\n"'
echo DONE
exit 0`

// TestRedTeamVerifyCache_NoWayToWriteFromInside: a cache whose modes allow every write
// (0777, 0666) stays byte- and metadata-identical on the host whatever the gate's command
// tries: remounts (plain, bind, in a new mount or user namespace, by raw syscall), writes
// through /proc/self/fd, /proc/<pid>/fd, /proc/1/root and /proc/self/root, chmod, chown,
// utime (path and fd), truncate, hard and symbolic links in or into it, a fifo, a rename,
// setxattr, an open for writing or creation.
func TestRedTeamVerifyCache_NoWayToWriteFromInside(t *testing.T) {
	e := newEnv(t)
	cache := openCache(t)
	e.setTarget(func(tg *config.Target) { tg.VerifyCache = cache })
	e.subagent("noop", "true")
	before := snapshot(t, cache)
	out := gateScript(t, e, escapeScript)
	if !strings.Contains(out, "READ-OK") || !strings.Contains(out, "DONE") {
		t.Fatalf("the script did not read the cache or did not finish:\n%s", out)
	}
	if broke := brokeLines(out); len(broke) > 0 {
		t.Errorf("attacks that worked from the verify sandbox: %v\n%s", broke, out)
	}
	if after := snapshot(t, cache); !slices.Equal(before, after) {
		t.Errorf("the host's cache changed:\nbefore %q\nafter  %q", before, after)
	}
}

// mountTmpfs mounts a tmpfs at dir (root only), unmounted at the test's end.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("redteam", dir, "tmpfs", 0, "mode=0777,size=64k"); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs below the cache (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// TestRedTeamVerifyCache_MountBelowRefused: a file system mounted below the cache on the host
// would reach the sandbox with it (bubblewrap's binds and bindPrivately's are recursive).
// Under bubblewrap a tmpfs there stayed read-only (commit f531fd8 tested it), but a bind of
// agora's home there showed the home to the patch's code past every path check, and a
// container engine's read-only bind need not be recursive (the Docker API made it so only in
// 1.44, and not on older kernels): the gate refuses such a cache and the command never runs.
func TestRedTeamVerifyCache_MountBelowRefused(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.subagent("noop", "true")
	t.Run("a tmpfs", func(t *testing.T) {
		cache := openCache(t)
		mountTmpfs(t, filepath.Join(cache, "mnt"))
		refusedGate(t, e, cache, "mounted below it at "+filepath.Join(cache, "mnt"))
	})
	t.Run("agora's home bound deep inside", func(t *testing.T) {
		cache := openCache(t)
		deep := filepath.Join(cache, "go-build", "ab", "home")
		bindAlias(t, e.home.Dir, deep)
		refusedGate(t, e, cache, "mounted below it at "+deep)
	})
	t.Run("a space in the mount point", func(t *testing.T) {
		cache := openCache(t)
		mountTmpfs(t, filepath.Join(cache, "a b"))
		refusedGate(t, e, cache, "mounted below it at "+filepath.Join(cache, "a b"))
	})
}

// TestRedTeamVerifyCache_LinksInsideStayInside: symlinks the operator's cache holds (one
// absolute, one relative climbing out, one to agora's key) are resolved in the sandbox's own
// root, where only the cache is bound: none reaches a world-readable canary elsewhere on the
// host or agora's key. A hard link to agora's key is the key file itself, so only its mode
// (0600, root) keeps the sandbox user out: the test shows that mode holds.
func TestRedTeamVerifyCache_LinksInsideStayInside(t *testing.T) {
	e := newEnv(t)
	cache := openCache(t)
	const canaryText = "redteam-canary-6f1d"
	canary := filepath.Join(worldDir(t), "canary.txt")
	if err := os.WriteFile(canary, []byte(canaryText+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(e.home.Dir, "keys", "secret.key")
	for name, target := range map[string]string{
		"abs":     canary,
		"rel":     strings.Repeat("../", 12) + strings.TrimPrefix(canary, "/"),
		"dirlink": filepath.Dir(canary),
		"key":     key,
		"keys":    filepath.Dir(key),
	} {
		if err := os.Symlink(target, filepath.Join(cache, name)); err != nil {
			t.Fatal(err)
		}
	}
	hardKey := false
	if err := os.Link(key, filepath.Join(cache, "hardkey")); err == nil {
		hardKey = true
	} else {
		t.Logf("no hard link to the key (another file system?): %v", err)
	}
	e.setTarget(func(tg *config.Target) { tg.VerifyCache = cache })
	e.subagent("noop", "true")
	out := gateScript(t, e, `C=$XDG_CACHE_HOME
cat "$C/abs" "$C/rel" "$C/dirlink/canary.txt" 2>&1
cat "$C/key" >/dev/null 2>&1 && echo BROKE:symlink-key
ls "$C/keys/" >/dev/null 2>&1 && echo BROKE:symlink-keys
[ -e "$C/hardkey" ] && echo HARDKEY-PRESENT
cat "$C/hardkey" >/dev/null 2>&1 && echo BROKE:hardlink-key
echo DONE; exit 0`)
	if !strings.Contains(out, "DONE") {
		t.Fatalf("the script did not finish:\n%s", out)
	}
	if strings.Contains(out, canaryText) {
		t.Errorf("a symlink in the cache reached a host file outside it:\n%s", out)
	}
	if broke := brokeLines(out); len(broke) > 0 {
		t.Errorf("the cache's links reached agora's keys: %v\n%s", broke, out)
	}
	if hardKey && !strings.Contains(out, "HARDKEY-PRESENT") {
		t.Errorf("the hard link was not in the sandbox's cache: the test proves nothing:\n%s", out)
	}
}

// TestRedTeamVerifyCache_NotInTheAgentSandbox: the agent's own run (the untrusted one before
// the gate) gets neither XDG_CACHE_HOME nor the bind, while its gate gets both.
func TestRedTeamVerifyCache_NotInTheAgentSandbox(t *testing.T) {
	e := newEnv(t)
	cache := openCache(t)
	e.setTarget(func(tg *config.Target) { tg.VerifyCache = cache })
	e.subagent("probe", `echo "agent-xdg=${XDG_CACHE_HOME:-unset}"
ls /agora/cache >/dev/null 2>&1 && echo AGENT-SAW-CACHE
grep -q "`+filepath.Base(filepath.Dir(cache))+`" /proc/self/mountinfo && echo AGENT-SAW-MOUNT
printf 'package calc\n\nfunc Sub(a, b int) int { return a - b }\n' > sub.go
true`)
	r := e.run(dispatch.Request{Subagent: "probe", Repo: calcRepo(t), Verify: &verdict.Spec{Command: []string{"sh", "-c", `echo "gate-xdg=$XDG_CACHE_HOME"; cat /agora/cache/seen.txt`}}})
	if r.State != lifecycle.DispatchFinished || r.Verdict == nil || !r.Verdict.Passed {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished and green", r.State, r.Reason, r.Detail, r.Verdict)
	}
	agent := e.stdout(r)
	if !strings.Contains(agent, "agent-xdg=unset") || strings.Contains(agent, "AGENT-SAW") {
		t.Errorf("the agent's sandbox had the verify cache:\n%s", agent)
	}
	if !strings.Contains(r.Verdict.OutputTail, "gate-xdg=/agora/cache\nwarm\n") {
		t.Errorf("the gate did not get the cache (the test would prove nothing):\n%s", r.Verdict.OutputTail)
	}
}

// refusedGate runs a gate with verify_cache set to dir and fails unless it ends
// provider-failed, naming verify_cache and want, without running the command.
func refusedGate(t *testing.T, e *env, dir, want string) {
	t.Helper()
	e.setTarget(func(tg *config.Target) { tg.VerifyCache = dir })
	r := e.run(dispatch.Request{Subagent: "noop", Repo: calcRepo(t), Verify: &verdict.Spec{Command: []string{"sh", "-c", "ls -laR /agora/cache; exit 0"}}})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed || r.Verdict != nil {
		out := ""
		if r.Verdict != nil {
			out = r.Verdict.OutputTail
		}
		t.Fatalf("verify_cache %s: dispatch %s %s (%s): want provider-failed and no verdict; the command saw:\n%s", dir, r.State, r.Reason, r.Detail, out)
	}
	if !strings.Contains(r.Detail, "verify_cache") || !strings.Contains(r.Detail, want) {
		t.Errorf("detail %q, want it to name verify_cache and %q", r.Detail, want)
	}
}

// TestRedTeamVerifyCache_HomeCheckBypasses: the home check must hold however the home's
// path is spelled in the dispatcher (a trailing slash, through a symlink) and however the
// cache names it ("//", a bind-mounted alias of the home or of a directory above it: before
// the fix, a trailing slash and both aliases bound the home's keys or its parent in the
// sandbox, where only the modes kept a root agora's sandbox user out; a non-root agora's
// sandbox runs as agora's own uid and would have read them). Also refused: /proc and /sys,
// which are directories with no symlink on their path and nowhere near the home, and would
// show the host's processes to the patch's code.
func TestRedTeamVerifyCache_HomeCheckBypasses(t *testing.T) {
	e := newEnv(t)
	e.subagent("noop", "true")
	home := e.home.Dir
	keys := filepath.Join(home, "keys")
	state := e.d.StateDir

	t.Run("state dir with a trailing slash", func(t *testing.T) {
		e.d.StateDir = state + "/"
		defer func() { e.d.StateDir = state }()
		refusedGate(t, e, keys, "is agora's home")
	})
	t.Run("state dir through a symlink", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "home-link")
		if err := os.Symlink(home, link); err != nil {
			t.Fatal(err)
		}
		e.d.StateDir = filepath.Join(link, filepath.Base(state))
		defer func() { e.d.StateDir = state }()
		refusedGate(t, e, keys, "is agora's home")
	})
	t.Run("double slash", func(t *testing.T) {
		refusedGate(t, e, strings.Replace(keys, "/keys", "//keys", 1), "verify_cache")
	})
	t.Run("bind-mounted alias of the home", func(t *testing.T) {
		alias := filepath.Join(worldDir(t), "alias")
		bindAlias(t, home, alias)
		refusedGate(t, e, filepath.Join(alias, "keys"), "is agora's home")
	})
	t.Run("bind-mounted alias above the home", func(t *testing.T) {
		alias := filepath.Join(worldDir(t), "alias")
		bindAlias(t, filepath.Dir(home), alias)
		refusedGate(t, e, alias, "is agora's home")
	})
	t.Run("proc", func(t *testing.T) { refusedGate(t, e, "/proc", "on /proc or /sys") })
	t.Run("a process of proc", func(t *testing.T) { refusedGate(t, e, "/proc/1", "on /proc or /sys") })
	t.Run("sys", func(t *testing.T) { refusedGate(t, e, "/sys/kernel", "on /proc or /sys") })
}

// bindAlias bind-mounts src at dst (root only), unmounted at the test's end.
func bindAlias(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("SKIP: cannot bind-mount an alias (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
}

// TestRedTeamVerifyCache_DockerReadOnly: on a docker target the cache is a bind of the
// engine's; the same writes from the gate's container leave the host's directory as it was.
func TestRedTeamVerifyCache_DockerReadOnly(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	cache := openCache(t)
	tg := e.home.Config.Targets["box"]
	tg.VerifyCache = cache
	e.home.Config.Targets["box"] = tg
	e.subagent("noop", "true")
	before := snapshot(t, cache)
	r := e.run(dispatch.Request{Subagent: "noop", Repo: calcRepo(t), Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: []string{"sh", "-c", escapeScript}}})
	if r.State != lifecycle.DispatchFinished || r.Verdict == nil {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished with a verdict", r.State, r.Reason, r.Detail, r.Verdict)
	}
	out := r.Verdict.OutputTail
	t.Logf("the container's output (the toolchain image may lack perl: those lines are no-ops there):\n%s", out)
	if !strings.Contains(out, "READ-OK") || !strings.Contains(out, "DONE") {
		t.Fatalf("the script did not read the cache or did not finish:\n%s", out)
	}
	if broke := brokeLines(out); len(broke) > 0 {
		t.Errorf("attacks that worked from the verify container: %v\n%s", broke, out)
	}
	if after := snapshot(t, cache); !slices.Equal(before, after) {
		t.Errorf("the host's cache changed:\nbefore %q\nafter  %q", before, after)
	}
}
