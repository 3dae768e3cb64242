package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Start_Cgroup(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	if p.cgroupParent == "" {
		t.Skip("SKIP: no writable cgroup v2 hierarchy here")
	}
	holdR, holdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer holdR.Close()
	defer holdW.Close()
	h, err := p.Start(t.Context(), compute.Spec{
		ID: "cg/../x", Argv: []string{"sh", "-c", "cat <&3"}, Env: []string{"PATH=/usr/bin:/bin"},
		Files:  []*os.File{holdR},
		Limits: compute.Limits{MaxProcs: 50, Memory: 300 << 20},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	hd := h.(*handle)
	if hd.cg == nil {
		holdW.Close()
		h.Wait()
		t.Skip("SKIP: the cgroup v2 parent " + p.cgroupParent + " refuses task cgroups here")
	}
	dir := hd.cg.dir
	if name := filepath.Base(dir); !strings.HasPrefix(name, "agora-cgx-") || filepath.Dir(dir) != p.cgroupParent {
		t.Errorf("task cgroup %s, want %s/agora-cgx-<random>", dir, p.cgroupParent)
	}
	path, err := procCgroupV2Path(strconv.Itoa(hd.pid))
	if err != nil || !strings.HasSuffix(path, "/"+filepath.Base(dir)) {
		t.Errorf("bwrap's cgroup = %q, %v; want the task cgroup %s", path, err, dir)
	}
	if hd.cg.memoryMax {
		b, _ := os.ReadFile(filepath.Join(dir, "memory.max"))
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(300<<20) {
			t.Errorf("memory.max = %q, want %d", got, 300<<20)
		}
	}
	if hd.cg.pidsMax {
		b, _ := os.ReadFile(filepath.Join(dir, "pids.max"))
		if got := strings.TrimSpace(string(b)); got != "50" {
			t.Errorf("pids.max = %q, want 50", got)
		}
	}
	holdW.Close()
	exit, err := h.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("Wait = %+v, %v", exit, err)
	}
	if !strings.Contains(exit.Isolation, "+cgroup") {
		t.Errorf("isolation = %q, want +cgroup", exit.Isolation)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("task cgroup %s still exists after Wait: %v", dir, err)
	}
}

func TestProvider_Start_Isolation_Tokens(t *testing.T) {
	requireBwrap(t)
	tests := []struct {
		name string
		opts Options
		spec compute.Spec
		want string
	}{
		{name: "None", opts: Options{NoCgroup: true}, spec: compute.Spec{Sandbox: compute.SandboxNone}, want: "none"},
		{name: "NoneWithCgroupStillNone", spec: compute.Spec{Sandbox: compute.SandboxNone}, want: "none"},
		{name: "BwrapWithoutCgroup", opts: Options{NoCgroup: true}, want: "bwrap+rlimits+memory-per-process"},
	}
	if os.Getuid() == 0 {
		tests[2].want += "+nproc-unenforced"
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, tt.opts)
			tt.spec.ID, tt.spec.Argv = "tok", []string{"true"}
			r := run(t, p, tt.spec)
			if r.exit.Isolation != tt.want {
				t.Errorf("isolation = %q, want %q", r.exit.Isolation, tt.want)
			}
		})
	}
}

func TestParseCgroupV2Mount(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		wantMount string
		wantRoot  string
		wantErr   bool
	}{
		{
			name: "Unified",
			mountinfo: "24 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n" +
				"25 30 0:23 / /proc rw - proc proc rw\n",
			wantMount: "/sys/fs/cgroup", wantRoot: "/",
		},
		{
			name: "Hybrid",
			mountinfo: "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n",
			wantMount: "/sys/fs/cgroup/unified", wantRoot: "/",
		},
		{
			name:      "EscapedNestedRoot",
			mountinfo: `41 31 0:38 /a\040b /mnt/c\040g rw - cgroup2 cgroup2 rw` + "\n",
			wantMount: "/mnt/c g", wantRoot: "/a b",
		},
		{name: "NoCgroup2", mountinfo: "25 30 0:23 / /proc rw - proc proc rw\n", wantErr: true},
		{name: "Empty", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mount, root, err := parseCgroupV2Mount([]byte(tt.mountinfo))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff([]string{tt.wantMount, tt.wantRoot}, []string{mount, root}); diff != "" {
				t.Errorf("mount, root (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCgroupDir(t *testing.T) {
	tests := []struct {
		name, mount, root, path string
		want                    string
		wantErr                 bool
	}{
		{name: "Root", mount: "/sys/fs/cgroup", root: "/", path: "/", want: "/sys/fs/cgroup"},
		{name: "Nested", mount: "/sys/fs/cgroup", root: "/", path: "/a/b", want: "/sys/fs/cgroup/a/b"},
		{name: "MountedSubtree", mount: "/cg", root: "/sub", path: "/sub/a", want: "/cg/a"},
		{name: "OutsideSubtree", mount: "/cg", root: "/sub", path: "/subx/a", wantErr: true},
		{name: "DotDot", mount: "/cg", root: "/", path: "/a/../../etc", wantErr: true},
		{name: "Relative", mount: "/cg", root: "/", path: "a", wantErr: true},
		{name: "Deleted", mount: "/cg", root: "/", path: "/a (deleted)", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cgroupDir(tt.mount, tt.root, tt.path)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("cgroupDir = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCgroupName(t *testing.T) {
	a, b := cgroupName("01J/../é x"), cgroupName("01J/../é x")
	if a == b {
		t.Errorf("two names for one id are equal (%s): want a random suffix", a)
	}
	if !strings.HasPrefix(a, "agora-01Jx-") || strings.ContainsAny(a, "/. ") {
		t.Errorf("name %q: want agora-01Jx-<hex> with only safe characters", a)
	}
	long := cgroupName(strings.Repeat("a", 500))
	if len(long) > 100 {
		t.Errorf("name of a long id is %d bytes", len(long))
	}
}

func TestCgroupBase(t *testing.T) {
	tests := []struct {
		name, id  string
		want      string
		wantExact bool
	}{
		{name: "ULID", id: "01M8198E9H3WJ6JTRTP9H0PHPV", want: "agora-01M8198E9H3WJ6JTRTP9H0PHPV", wantExact: true},
		{name: "Dashes", id: "a-b_c", want: "agora-a-b_c", wantExact: true},
		{name: "Empty", id: "", want: "agora-"},
		{name: "Dropped", id: "a/../b", want: "agora-ab"},
		{name: "NonASCII", id: "é", want: "agora-"},
		{name: "Longest", id: strings.Repeat("a", 58), want: "agora-" + strings.Repeat("a", 58), wantExact: true},
		{name: "Cut", id: strings.Repeat("a", 59), want: "agora-" + strings.Repeat("a", 58)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, exact := cgroupBase(tt.id)
			if got != tt.want || exact != tt.wantExact {
				t.Errorf("cgroupBase(%q) = %q, %v; want %q, %v", tt.id, got, exact, tt.want, tt.wantExact)
			}
		})
	}
}

func TestIsCgroupOf(t *testing.T) {
	tests := []struct {
		name, cgroup, base string
		want               bool
	}{
		{name: "Made", cgroup: cgroupName("x1"), base: "agora-x1", want: true},
		{name: "OtherIDWithDash", cgroup: cgroupName("x1-0123456789ab"), base: "agora-x1"},
		{name: "LongerID", cgroup: cgroupName("x12"), base: "agora-x1"},
		{name: "ShortSuffix", cgroup: "agora-x1-0123456789a", base: "agora-x1"},
		{name: "UpperHex", cgroup: "agora-x1-0123456789AB", base: "agora-x1"},
		{name: "NoDash", cgroup: "agora-x10123456789ab", base: "agora-x1"},
		{name: "Foreign", cgroup: "system.slice", base: "agora-x1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isCgroupOf(tt.cgroup, tt.base); got != tt.want {
				t.Errorf("isCgroupOf(%q, %q) = %v, want %v", tt.cgroup, tt.base, got, tt.want)
			}
		})
	}
}

// TestProvider_Release plays the host after a supervisor died with -9: the task cgroup it
// made outlives it (here with a process still in it), and only Release, called with the
// dispatch id, finds it. A sibling id's cgroup and a task this provider still monitors are
// left alone.
func TestProvider_Release(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	if p.cgroupParent == "" {
		t.Skip("SKIP: no writable cgroup v2 hierarchy here")
	}
	id := "rel" + strconv.FormatInt(time.Now().UnixNano(), 36)

	// The dead supervisor's cgroup, with a process that outlived it.
	orphan := filepath.Join(p.cgroupParent, cgroupName(id))
	if err := os.Mkdir(orphan, 0o755); err != nil {
		t.Skipf("SKIP: cannot make a cgroup under %s: %v", p.cgroupParent, err)
	}
	t.Cleanup(func() { (&cgroup{dir: orphan}).remove() })
	cgFD, err := os.Open(orphan)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "1000")
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cgFD.Fd())}
	err = sleeper.Start()
	cgFD.Close()
	if err != nil {
		t.Fatalf("start a process in %s: %v", orphan, err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })

	// Another dispatch's cgroup whose id extends this one.
	sibling := filepath.Join(p.cgroupParent, cgroupName(id+"-0123456789ab"))
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sibling) })

	// A task of the same id that this provider still monitors.
	holdR, holdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer holdR.Close()
	defer holdW.Close()
	h, err := p.Start(t.Context(), compute.Spec{
		ID: id, Argv: []string{"sh", "-c", "cat <&3"}, Env: []string{"PATH=/usr/bin:/bin"},
		Files: []*os.File{holdR},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	live := h.(*handle).cg

	if err := p.Release(t.Context(), id); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the process left in the orphan cgroup ended with %v, want killed", err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphan cgroup %s is still there after Release: %v", orphan, err)
	}
	if _, err := os.Stat(sibling); err != nil {
		t.Errorf("Release(%q) removed the cgroup of another id: %v", id, err)
	}
	if live != nil {
		if _, err := os.Stat(live.dir); err != nil {
			t.Errorf("Release removed the cgroup of a task the provider still monitors: %v", err)
		}
	}
	holdW.Close()
	if exit, err := h.Wait(); err != nil || exit.Code != 0 {
		t.Errorf("the monitored task ended %+v, %v; want exit 0, untouched by Release", exit, err)
	}
	if err := p.Release(t.Context(), id); err != nil {
		t.Errorf("a second Release: %v", err)
	}
	if err := p.Release(t.Context(), "a/../b"); err == nil {
		t.Errorf("Release of an id whose cgroup name drops characters: got nil, want an error")
	}
}
