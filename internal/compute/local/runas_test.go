package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// requireRoot skips loudly unless the test runs as root.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: only a root provider can run a sandbox as another host user")
	}
}

// privateDir makes a 0700 root directory holding ro/f (readable by u) and an empty rw/
// (writable by u): the layout of a dispatch's stage inside AGORA_HOME.
func privateDir(t *testing.T, u *compute.HostUser) (dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "home")
	for _, d := range []string{dir, filepath.Join(dir, "ro"), filepath.Join(dir, "rw")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ro", "f"), []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "ro"), filepath.Join(dir, "ro", "f"), filepath.Join(dir, "rw")} {
		if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBwrap_RunAsCannotReachPrivateDir is the control for the private mount namespace:
// bwrap run directly as the sandbox user cannot bind a source below a 0700 root directory,
// whether by path or by an inherited descriptor (--bind-fd): it resolves the descriptor's
// path and walks it as that user.
func TestBwrap_RunAsCannotReachPrivateDir(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	dir := privateDir(t, testRunAs)
	src, err := os.Open(filepath.Join(dir, "rw"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for name, bind := range map[string][]string{
		"path":    {"--bind", filepath.Join(dir, "rw"), "/rw"},
		"bind-fd": {"--bind-fd", "3", "/rw"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
				"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"}, bind...)
			cmd := exec.Command("bwrap", append(args, "true")...)
			cmd.ExtraFiles = []*os.File{src}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testRunAs.UID, Gid: testRunAs.GID, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Permission denied") {
				t.Errorf("bwrap as uid %d binding below a 0700 directory: %v %q, want a permission error", testRunAs.UID, err, out)
			}
		})
	}
}

// TestProvider_Start_RunAsReachesPrivateBinds: a sandbox run as another host user gets its
// binds from below a 0700 root directory (as a dispatch's stage is, under AGORA_HOME),
// reads what is readable by it and writes what is writable by it, while the host's mount
// table never shows the binds.
func TestProvider_Start_RunAsReachesPrivateBinds(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	dir := privateDir(t, testRunAs)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, Options{})
	var out, errOut syncBuffer
	script := `cat /ro/f; echo; id -u; echo written > /rw/g; while [ ! -e /rw/go ]; do sleep 0.02; done`
	h, err := p.Start(t.Context(), compute.Spec{
		ID: "runas", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{
			{Src: filepath.Join(dir, "ro"), Dst: "/ro"},
			{Src: filepath.Join(dir, "rw"), Dst: "/rw", Writable: true},
		},
		Stdout: &out, Stderr: &errOut, RunAs: testRunAs,
		Limits: compute.Limits{Timeout: time.Minute},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	agoratest.WaitFor(t, 30*time.Second, "the sandbox to write /rw/g", func() bool {
		_, err := os.Stat(filepath.Join(dir, "rw", "g"))
		return err == nil
	})
	if mounts, err := os.ReadFile("/proc/1/mountinfo"); err != nil || strings.Contains(string(mounts), privateRoot) {
		t.Errorf("the host's mount table shows the private binds (%v):\n%s", err, mounts)
	}
	// Exactly one thread of this process, never the main one, is in the private namespace.
	if tids := threadsSeeing(t, privateRoot); len(tids) != 1 || tids[0] == strconv.Itoa(os.Getpid()) {
		t.Errorf("threads in the private mount namespace: %v, want one that is not the main thread", tids)
	}
	if err := os.WriteFile(filepath.Join(dir, "rw", "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exit, err := h.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("Wait = %+v, %v; stderr %q", exit, err, errOut.String())
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != "staged 65534" {
		t.Errorf("stdout %q, want the staged file and uid 65534 inside", out.String())
	}
	fi, err := os.Stat(filepath.Join(dir, "rw", "g"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != testRunAs.UID {
		t.Errorf("file written by the sandbox is owned by host uid %d, want %d", st.Uid, testRunAs.UID)
	}
	// The thread, and with it the namespace and its binds, ends with the sandbox.
	agoratest.WaitFor(t, 30*time.Second, "the private mount namespace to end", func() bool { return len(threadsSeeing(t, privateRoot)) == 0 })
	if !strings.Contains(exit.Isolation, "+runas") || strings.Contains(exit.Isolation, "nproc-unenforced") {
		t.Errorf("isolation %q, want +runas and no nproc-unenforced", exit.Isolation)
	}
}

// threadsSeeing lists the threads of this process whose mount table mentions path.
func threadsSeeing(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "mountinfo"))
		if err == nil && strings.Contains(string(b), path) {
			tids = append(tids, e.Name())
		}
	}
	return tids
}

// TestProvider_Isolation_RootWithoutRunAs: a root provider that runs a sandbox as itself
// says the process limit is not enforced.
func TestProvider_Isolation_RootWithoutRunAs(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{NoCgroup: true})
	r := run(t, p, compute.Spec{ID: "iso", Argv: []string{"true"}})
	want := "bwrap+rlimits+memory-per-process"
	if os.Getuid() == 0 {
		want += "+nproc-unenforced"
	}
	if r.exit.Isolation != want {
		t.Errorf("isolation %q, want %q", r.exit.Isolation, want)
	}
}

// TestProvider_Start_RunAsNeedsRoot: a provider that is not root refuses RunAs instead of
// running the sandbox as itself.
func TestProvider_Start_RunAsNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("SKIP: runs as root, where RunAs is allowed; the refusal is for unprivileged providers")
	}
	p := newProvider(t, Options{})
	_, err := p.Start(t.Context(), compute.Spec{ID: "x", Argv: []string{"true"}, RunAs: testRunAs})
	if !errors.Is(err, ErrRunAsNotRoot) {
		t.Errorf("Start = %v, want ErrRunAsNotRoot", err)
	}
}
