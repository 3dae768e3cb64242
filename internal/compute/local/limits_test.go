package local

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// TestOpenFiles: the sandbox's open files limit is MaxOpenFiles, or this process's hard
// limit when that is lower (the sandbox could not be given more).
func TestOpenFiles(t *testing.T) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		t.Fatal(err)
	}
	if want := min(uint64(MaxOpenFiles), cur.Max); openFiles() != want {
		t.Errorf("openFiles() = %d, want %d (hard limit here %d)", openFiles(), want, cur.Max)
	}
}

// TestProvider_Start_OpenFilesLimit: every sandbox gets RLIMIT_NOFILE, soft and hard alike,
// and cannot raise it. Without it a sandbox process inherits the host's hard limit (often a
// million), raises its soft limit to it, and can hold that many connections to the
// dispatch's gateway, whose cost the host-side supervisor bears.
func TestProvider_Start_OpenFilesLimit(t *testing.T) {
	requireBwrap(t)
	n := openFiles()
	if n < MaxOpenFiles {
		t.Logf("this process's hard limit is %d, under %d: the sandbox gets %d", n, MaxOpenFiles, n)
	}
	p := newProvider(t, Options{})
	cases := map[string]compute.Spec{
		"bwrap": {Sandbox: compute.SandboxBwrap},
		"none":  {Sandbox: compute.SandboxNone},
	}
	if os.Geteuid() == 0 {
		// With RunAs, prlimit(1) applies the limits inside the sandbox instead.
		cases["runas"] = compute.Spec{Sandbox: compute.SandboxBwrap, RunAs: testRunAs}
	}
	// The limit as /proc shows it, then an attempt to raise it by one, which must fail.
	script := fmt.Sprintf(`cat /proc/self/limits; ulimit -n %d && echo RAISED`, n+1)
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			s.ID, s.Argv = "nofile", []string{"sh", "-c", script}
			r := run(t, p, s)
			re := regexp.MustCompile(fmt.Sprintf("(?m)^Max open files +%d +%d ", n, n))
			if !re.MatchString(r.stdout) {
				t.Errorf("open files limit is not %d (soft and hard) inside:\n%s%s", n, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "RAISED") {
				t.Errorf("the sandbox raised its open files limit to %d", n+1)
			}
		})
	}
}
