package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Start_NoSandbox(t *testing.T) {
	p := newProvider(t, Options{BwrapPath: "/nonexistent/bwrap"})
	_, err := p.Start(t.Context(), compute.Spec{ID: "nosb", Argv: []string{"true"}})
	if !errors.Is(err, ErrNoSandbox) {
		t.Fatalf("Start = %v, want ErrNoSandbox", err)
	}
	for _, hint := range []string{"apt-get install bubblewrap", "dnf install bubblewrap", "pacman -S bubblewrap"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q lacks the hint %q", err, hint)
		}
	}
	// The explicit escape still works without bwrap.
	r := run(t, p, compute.Spec{ID: "nosb", Sandbox: compute.SandboxNone, Argv: []string{"true"}})
	if r.exit.Code != 0 || r.exit.Isolation != "none" {
		t.Errorf("sandbox none without bwrap: %+v", r.exit)
	}
}

// TestProvider_Start_BwrapInstalledLater: a provider made while bwrap is missing (a resident
// dispatcher started before bubblewrap was installed) refuses sandboxed starts while it is,
// and runs them once it is there, without being made again.
func TestProvider_Start_BwrapInstalledLater(t *testing.T) {
	requireBwrap(t)
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	later := filepath.Join(t.TempDir(), "bwrap")
	p := newProvider(t, Options{BwrapPath: later})
	if _, err := p.Start(t.Context(), compute.Spec{ID: "early", Argv: []string{"true"}}); !errors.Is(err, ErrNoSandbox) {
		t.Fatalf("Start before bwrap is there = %v, want ErrNoSandbox", err)
	}
	if err := os.Symlink(real, later); err != nil {
		t.Fatal(err)
	}
	r := run(t, p, compute.Spec{ID: "later", Argv: []string{"sh", "-c", "echo sandboxed"}})
	if r.exit.Code != 0 || strings.TrimSpace(r.stdout) != "sandboxed" || r.exit.Isolation == "none" {
		t.Errorf("Start once bwrap is there: %+v, stdout %q", r.exit, r.stdout)
	}
}

func TestProvider_Start_NoPrlimit(t *testing.T) {
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	_, err := p.Start(t.Context(), compute.Spec{ID: "noprl", Sandbox: compute.SandboxNone, Argv: []string{"true"}})
	if !errors.Is(err, ErrNoPrlimit) || !strings.Contains(err.Error(), "apt-get install util-linux") {
		t.Errorf("sandbox none: Start = %v, want ErrNoPrlimit with the install hint", err)
	}
	// A bwrap sandbox, RunAs or not, needs no prlimit(1): the provider sets its
	// limits with prlimit(2) (TestProvider_Start_RunAsLimitsWithoutPrlimitExec checks them).
}

func TestProvider_Start_InvalidSpec(t *testing.T) {
	p := newProvider(t, Options{})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	valid := compute.Spec{ID: "bad", Argv: []string{"true"}, Env: []string{"A=1"}, Files: []*os.File{r}}
	tests := []struct {
		name    string
		mutate  func(*compute.Spec)
		wantMsg string
	}{
		{name: "UnknownSandbox", mutate: func(s *compute.Spec) { s.Sandbox = "docker" }, wantMsg: "sandbox"},
		{name: "EmptyArgv", mutate: func(s *compute.Spec) { s.Argv = nil }, wantMsg: "argv is empty"},
		{name: "NulInArgv", mutate: func(s *compute.Spec) { s.Argv = []string{"true", "a\x00--bind"} }, wantMsg: "argv[1]"},
		{name: "EnvWithoutEquals", mutate: func(s *compute.Spec) { s.Env = []string{"JUSTNAME"} }, wantMsg: "env[0]"},
		{name: "EnvEmptyName", mutate: func(s *compute.Spec) { s.Env = []string{"=v"} }, wantMsg: "env[0]"},
		{name: "NulInEnvValue", mutate: func(s *compute.Spec) { s.Env = []string{"K=secret\x00--bind\x00/\x00/x"} }, wantMsg: "env[0]"},
		{name: "DuplicateEnv", mutate: func(s *compute.Spec) { s.Env = []string{"K=1", "K=2"} }, wantMsg: "set twice"},
		{name: "RelativeDir", mutate: func(s *compute.Spec) { s.Dir = "work" }, wantMsg: "dir"},
		{name: "UncleanDir", mutate: func(s *compute.Spec) { s.Dir = "/a/../b" }, wantMsg: "dir"},
		{name: "RelativeBindSrc", mutate: func(s *compute.Spec) { s.Binds = []compute.Bind{{Src: "x", Dst: "/x"}} }, wantMsg: "binds[0].src"},
		{name: "OptionAsBindDst", mutate: func(s *compute.Spec) { s.Binds = []compute.Bind{{Src: "/x", Dst: "--bind"}} }, wantMsg: "binds[0].dst"},
		{name: "BindOverRoot", mutate: func(s *compute.Spec) { s.Binds = []compute.Bind{{Src: "/x", Dst: "/"}} }, wantMsg: "root"},
		{name: "NoneCannotMapPaths", mutate: func(s *compute.Spec) {
			s.Sandbox = compute.SandboxNone
			s.Binds = []compute.Bind{{Src: "/a", Dst: "/b"}}
		}, wantMsg: "cannot map"},
		{name: "NilFile", mutate: func(s *compute.Spec) { s.Files = []*os.File{nil} }, wantMsg: "files[0]"},
		{name: "NegativeLimit", mutate: func(s *compute.Spec) { s.Limits.Memory = -1 }, wantMsg: "negative"},
		{name: "RunAsRoot", mutate: func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 0, GID: 1000} }, wantMsg: "run as 0:1000"},
		{name: "RunAsMinusOne", mutate: func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 1000, GID: 1<<32 - 1} }, wantMsg: "run as 1000:4294967295"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid
			tt.mutate(&s)
			_, err := p.Start(t.Context(), s)
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Start = %v, want ErrInvalidSpec mentioning %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q echoes an environment value", err)
			}
		})
	}
}

func TestBwrapOptions(t *testing.T) {
	system := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"}
	s := compute.Spec{
		Argv:  []string{"worker"},
		Env:   []string{"PATH=/usr/bin", "TOKENISH=value-not-secret", "PWD=/elsewhere"},
		Dir:   "/work",
		Binds: []compute.Bind{{Src: "/host/ws", Dst: "/work", Writable: true}, {Src: "/host/in", Dst: "/in"}},
	}
	fds := newFDLayout(1)
	opts := bwrapOptions(s, system, stagedSystem{}, fds, true)

	pairs := func(flag string) [][2]string {
		var out [][2]string
		for i, o := range opts {
			if o == flag && i+2 < len(opts) {
				out = append(out, [2]string{opts[i+1], opts[i+2]})
			}
		}
		return out
	}
	if diff := cmp.Diff([][2]string{{"PATH", "/usr/bin"}, {"TOKENISH", "value-not-secret"}}, pairs("--setenv")); diff != "" {
		t.Errorf("--setenv (-want +got):\n%s", diff)
	}
	if opts[0] != "--clearenv" {
		t.Errorf("first option %q, want --clearenv before any --setenv", opts[0])
	}
	for _, want := range [][]string{
		{"--unshare-all"}, {"--unshare-user"}, {"--disable-userns"}, {"--die-with-parent"}, {"--new-session"},
		{"--cap-drop", "ALL"}, {"--uid", "65534"}, {"--gid", "65534"}, {"--hostname", "agora"},
		{"--proc", "/proc"}, {"--dev", "/dev"}, {"--tmpfs", "/tmp"}, {"--chdir", "/work"},
		{"--info-fd", "5"}, {"--block-fd", "6"},
	} {
		if !containsRun(opts, want) {
			t.Errorf("options lack %q", want)
		}
	}
	if slices.Contains(opts, "--share-net") {
		t.Errorf("--share-net without Network")
	}
	for _, p := range []string{"/etc/resolv.conf", "/etc/gitconfig", "/etc/shadow", "/etc/ssl/private", "/etc/ssl"} {
		if slices.Contains(opts, p) {
			t.Errorf("options mention %s", p)
		}
	}
	// System binds come first, then /proc, /dev, /tmp, then the spec's binds in order.
	iSys, iTmp := index(opts, "/usr"), index(opts, "--tmpfs")
	iWs, iIn := index(opts, "/host/ws"), index(opts, "/host/in")
	if !(iSys < iTmp && iTmp < iWs && iWs < iIn) || opts[iWs-1] != "--bind" || opts[iIn-1] != "--ro-bind" {
		t.Errorf("bind order or kind wrong: %q", opts)
	}

	if unblocked := bwrapOptions(s, system, stagedSystem{}, fds, false); slices.Contains(unblocked, "--block-fd") || slices.Contains(unblocked, "--info-fd") {
		t.Errorf("unblocked options wait on a descriptor: %q", unblocked)
	}

	s.Network = true
	opts = bwrapOptions(s, system, stagedSystem{}, fds, true)
	if !slices.Contains(opts, "--share-net") || !containsRun(opts, []string{"--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"}) {
		t.Errorf("Network: options lack --share-net or resolv.conf: %q", opts)
	}
}

func TestBwrapArgv_HoldsNoEnvironment(t *testing.T) {
	argv := bwrapArgv("/usr/bin/bwrap", newFDLayout(2), []string{"worker", "-v"})
	want := []string{"/usr/bin/bwrap", "--args", "5", "--", "worker", "-v"}
	if diff := cmp.Diff(want, argv); diff != "" {
		t.Errorf("bwrap argv (-want +got):\n%s", diff)
	}
}

func TestPrlimitArgv(t *testing.T) {
	argv := prlimitArgv("/usr/bin/prlimit", resolveLimits(compute.Limits{}), []string{"worker", "-v"})
	want := []string{
		"/usr/bin/prlimit", "--nproc=256", "--fsize=1073741824", "--as=4294967296", "--core=0",
		fmt.Sprintf("--nofile=%d", openFiles()), "--",
		"worker", "-v",
	}
	if diff := cmp.Diff(want, argv); diff != "" {
		t.Errorf("prlimit argv (-want +got):\n%s", diff)
	}
}

func TestSystemOptions(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "lib64"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/bin", root+"/bin"); err != nil {
		t.Fatal(err)
	}
	got := systemOptions(root)
	want := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--ro-bind", "/lib64", "/lib64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("system options (-want +got):\n%s", diff)
	}
}

func TestEncodeArgs(t *testing.T) {
	got := encodeArgs([]string{"--setenv", "K", "a b", ""})
	if want := "--setenv\x00K\x00a b\x00\x00"; string(got) != want {
		t.Errorf("encodeArgs = %q, want %q", got, want)
	}
}

func containsRun(s, run []string) bool {
	for i := 0; i+len(run) <= len(s); i++ {
		if slices.Equal(s[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func index(s []string, v string) int { return slices.Index(s, v) }
