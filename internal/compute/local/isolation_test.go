package local

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Start_Isolation(t *testing.T) {
	requireBwrap(t)
	t.Setenv("AGORA_TEST_HOST_CANARY", "host-canary-value")
	p := newProvider(t, Options{})

	hidden := filepath.Join(t.TempDir(), "hidden.txt")
	if err := os.WriteFile(hidden, []byte("host-only"), 0o644); err != nil {
		t.Fatal(err)
	}
	roDir, rwDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(roDir, "in.txt"), []byte("readable"), 0o644); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if home == "" {
		home = "/root"
	}
	binds := []compute.Bind{{Src: roDir, Dst: "/ro"}, {Src: rwDir, Dst: "/rw", Writable: true}}

	tests := isolationCases(hidden, home, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, p, compute.Spec{ID: "iso", Argv: []string{"sh", "-c", tt.script}, Binds: binds})
			if r.exit.Code != tt.want {
				t.Errorf("%q exited %d, want %d (stdout %q, stderr %q)", tt.script, r.exit.Code, tt.want, r.stdout, r.stderr)
			}
		})
	}
	t.Run("WritableBindIsVisibleOnHost", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(rwDir, "out.txt"))
		if err != nil || string(b) != "written\n" {
			t.Errorf("host sees %q, %v; want %q", b, err, "written\n")
		}
		if _, err := os.Stat(filepath.Join(roDir, "new.txt")); err == nil {
			t.Errorf("a write through the read-only bind reached the host")
		}
	})
	t.Run("ProcShowsOnlySandboxPids", func(t *testing.T) {
		r := run(t, p, compute.Spec{ID: "iso", Argv: []string{"sh", "-c", "ls /proc | grep '^[0-9]'"}})
		var pids []int
		for f := range strings.FieldsSeq(r.stdout) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("pid %q: %v", f, err)
			}
			pids = append(pids, n)
		}
		// pid 1 is bwrap's init, then the shell and ls: a handful of small pids.
		if len(pids) == 0 || len(pids) > 5 || pids[0] != 1 {
			t.Errorf("pids inside = %v, want a few sandbox pids starting at 1", pids)
		}
		for _, n := range pids {
			if n > 10 {
				t.Errorf("pid %d inside looks like a host pid (all %v)", n, pids)
			}
		}
	})
}

func TestProvider_Start_Network(t *testing.T) {
	requireBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	p := newProvider(t, Options{})
	tests := []struct {
		name    string
		network bool
		want    int
	}{
		{name: "Isolated", network: false, want: 1},
		{name: "Shared", network: true, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, p, compute.Spec{
				ID:      "net",
				Argv:    []string{"/probe", ln.Addr().String()},
				Env:     []string{probeEnv + "=connect"},
				Binds:   []compute.Bind{probeBind(t)},
				Network: tt.network,
			})
			if r.exit.Code != tt.want {
				t.Errorf("connect to host listener exited %d, want %d (stdout %q, stderr %q)", r.exit.Code, tt.want, r.stdout, r.stderr)
			}
		})
	}
	t.Run("IsolatedHasOnlyLoopback", func(t *testing.T) {
		r := run(t, p, compute.Spec{ID: "net", Argv: []string{"sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"}})
		if strings.TrimSpace(r.stdout) != "lo" {
			t.Errorf("interfaces inside: %q (stderr %q), want only lo", r.stdout, r.stderr)
		}
	})
	t.Run("ResolvConfOnlyWithNetwork", func(t *testing.T) {
		if _, err := os.Stat("/etc/resolv.conf"); err != nil {
			t.Skip("SKIP: host has no /etc/resolv.conf")
		}
		for _, network := range []bool{false, true} {
			r := run(t, p, compute.Spec{ID: "net", Argv: []string{"test", "-e", "/etc/resolv.conf"}, Network: network})
			if got := r.exit.Code == 0; got != network {
				t.Errorf("Network=%v: resolv.conf present = %v", network, got)
			}
		}
	})
}

func TestProvider_Start_Limits(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	t.Run("FileSize", func(t *testing.T) {
		dir := t.TempDir()
		const limit = 1 << 20
		r := run(t, p, compute.Spec{
			ID:     "fsize",
			Argv:   []string{"sh", "-c", "head -c 3000000 /dev/zero > /out/big"},
			Binds:  []compute.Bind{{Src: dir, Dst: "/out", Writable: true}},
			Limits: compute.Limits{FileSize: limit},
		})
		if r.exit.Code == 0 {
			t.Errorf("writing 3 MB under a 1 MiB limit succeeded")
		}
		fi, err := os.Stat(filepath.Join(dir, "big"))
		if err != nil || fi.Size() > limit {
			t.Errorf("file on host: %v, %v; want at most %d bytes", fi, err, limit)
		}
	})
	t.Run("Memory", func(t *testing.T) {
		script := `x=$(head -c 40000000 /dev/zero | tr '\0' a); echo ${#x}`
		r := run(t, p, compute.Spec{ID: "mem", Argv: []string{"sh", "-c", script}, Limits: compute.Limits{Memory: 24 << 20}})
		if r.exit.Code == 0 {
			t.Errorf("holding 40 MB under a 24 MiB address-space limit succeeded: %q", r.stdout)
		}
		r = run(t, p, compute.Spec{ID: "mem", Argv: []string{"sh", "-c", script}})
		if r.exit.Code != 0 || strings.TrimSpace(r.stdout) != "40000000" {
			t.Errorf("control run under the default limit: %+v %q %q", r.exit, r.stdout, r.stderr)
		}
	})
	t.Run("RlimitsInside", func(t *testing.T) {
		runAs := map[string]*compute.HostUser{"default": nil}
		if os.Geteuid() == 0 {
			// With RunAs, prlimit(1) applies the limits inside the sandbox instead.
			runAs["runas"] = testRunAs
		}
		for name, u := range runAs {
			r := run(t, p, compute.Spec{
				ID:     "ulimit",
				Argv:   []string{"cat", "/proc/self/limits"},
				Limits: compute.Limits{MaxProcs: 77, FileSize: 512 * 1024, Memory: 256 << 20},
				RunAs:  u,
			})
			want := map[string]string{
				"Max processes":      "77",
				"Max file size":      "524288",
				"Max address space":  "268435456",
				"Max core file size": "0",
			}
			for limit, v := range want {
				re := regexp.MustCompile("(?m)^" + limit + " +" + v + " +" + v + " ")
				if !re.MatchString(r.stdout) {
					t.Errorf("%s: limit %q is not %s (soft and hard) inside:\n%s%s", name, limit, v, r.stdout, r.stderr)
				}
			}
		}
	})
}

func TestProvider_Start_InheritsOnlySpecFiles(t *testing.T) {
	requireBwrap(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, sandbox := range []string{compute.SandboxBwrap, compute.SandboxNone} {
		t.Run(sandbox, func(t *testing.T) {
			// A descriptor this process holds without FD_CLOEXEC, as one inherited from
			// a shell would be, must not reach the sandbox.
			leak, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer leak.Close()
			if _, err := unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0); err != nil {
				t.Fatal(err)
			}
			p := newProvider(t, Options{})
			// ls opens /proc/self/fd itself as the lowest free descriptor, 4.
			r := run(t, p, compute.Spec{ID: "fds", Sandbox: sandbox, Argv: []string{"ls", "/proc/self/fd"}, Files: []*os.File{f}})
			if got := strings.Fields(r.stdout); strings.Join(got, " ") != "0 1 2 3 4" {
				t.Errorf("descriptors inside = %v, want 0 1 2 3 and ls's own 4 (bwrap's plumbing closed)", got)
			}
		})
	}
}

// isolationCase is one probe of the isolation suite: a script and the exit it must have.
type isolationCase struct {
	name   string
	script string
	want   int
}

// isolationCases is the isolation probe suite, run in a cold sandbox here and in a warm
// slot by TestSlot_IsolationSameAsCold. Its read-only and writable binds are at
// prefix+"/ro" and prefix+"/rw".
func isolationCases(hidden, home, prefix string) []isolationCase {
	return []isolationCase{
		{name: "UnboundHostFileIsAbsent", script: "cat " + hidden, want: 1},
		{name: "RootHomeIsAbsent", script: "ls /root", want: 2},
		{name: "HostHomeIsAbsent", script: "test -e " + home, want: 1},
		{name: "ShadowIsAbsent", script: "test -e /etc/shadow", want: 1},
		{name: "GitconfigIsAbsent", script: "test -e /etc/gitconfig", want: 1},
		{name: "ReadOnlyBindIsReadable", script: "grep -q readable " + prefix + "/ro/in.txt", want: 0},
		{name: "ReadOnlyBindRefusesWrites", script: "echo x > " + prefix + "/ro/new.txt", want: 2},
		{name: "UsrRefusesWrites", script: "touch /usr/agora-test", want: 1},
		{name: "WritableBindAcceptsWrites", script: "echo written > " + prefix + "/rw/out.txt", want: 0},
		{name: "HostnameIsAgora", script: `test "$(hostname)" = agora`, want: 0},
		{name: "NoCapabilities", script: "grep -q '^CapEff:.0000000000000000$' /proc/self/status", want: 0},
		{name: "NoNewPrivs", script: "grep -q '^NoNewPrivs:.1$' /proc/self/status", want: 0},
		{name: "NoNestedUserNamespace", script: "unshare -U true", want: 1},
		{name: "HostInitEnvironIsUnreachable", script: "cat /proc/1/environ | tr '\\0' '\\n' | grep -q AGORA_TEST_HOST_CANARY", want: 1},
		{name: "ProcOneIsTheSandboxInit", script: "tr '\\0' ' ' < /proc/1/cmdline | grep -q 'bwrap --args '", want: 0},
		{name: "HostPidIsInvisible", script: "test -e /proc/" + strconv.Itoa(os.Getpid()) + "/stat", want: 1},
	}
}
