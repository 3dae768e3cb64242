package local

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// layoutScript prints what a program sees of /etc and /dev: the entries, their types and
// link targets, then whether each device works.
const layoutScript = `
cd /etc && find . | sort | while read f; do
  if [ -L "$f" ]; then echo "etc $f -> $(readlink "$f")"; elif [ -d "$f" ]; then echo "etc $f/"; else echo "etc $f"; fi
done
cd /dev && for f in $(ls -A | sort); do
  if [ -L "$f" ]; then echo "dev $f -> $(readlink "$f")"; elif [ -c "$f" ]; then echo "dev $f (char)"; elif [ -d "$f" ]; then echo "dev $f/"; else echo "dev $f"; fi
done
echo x > /dev/null && echo "null writes"
[ "$(head -c 4 /dev/zero | od -An -tx1 | tr -d ' ')" = 00000000 ] && echo "zero reads"
[ "$(head -c 16 /dev/urandom | wc -c)" = 16 ] && echo "urandom reads"
[ "$(head -c 4 /dev/random | wc -c)" = 4 ] && echo "random reads"
echo x > /dev/full 2>/dev/null || echo "full is full"
[ -c /dev/pts/ptmx ] && echo "pts has ptmx"
python3 -c 'import os; m, s = os.openpty(); print("openpty works")' 2>/dev/null || echo "no python3 for openpty"
cat /etc/passwd | head -c 0 && echo "passwd reads"
`

// TestStage_SameLayoutAsBwraps: a sandbox run as another user, whose /etc and /dev are
// staged, sees the same entries, links and working devices as one whose bwrap builds them.
func TestStage_SameLayoutAsBwraps(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	for _, network := range []bool{false, true} {
		built := run(t, p, compute.Spec{ID: "built", Argv: []string{"sh", "-c", layoutScript}, Network: network})
		staged := run(t, p, compute.Spec{ID: "staged", Argv: []string{"sh", "-c", layoutScript}, Network: network, RunAs: testRunAs})
		if built.exit.Code != 0 || staged.exit.Code != 0 {
			t.Fatalf("network %v: exits %+v, %+v\n%s\n%s", network, built.exit, staged.exit, built.stderr, staged.stderr)
		}
		if built.stdout != staged.stdout {
			t.Errorf("network %v: the staged layout differs from bwrap's:\nbwrap's:\n%s\nstaged:\n%s", network, built.stdout, staged.stdout)
		}
		for _, want := range []string{"etc ./passwd", "dev null (char)", "dev ptmx -> pts/ptmx", "null writes", "zero reads",
			"urandom reads", "random reads", "full is full", "pts has ptmx", "passwd reads"} {
			if !strings.Contains(staged.stdout, want+"\n") {
				t.Errorf("network %v: the staged sandbox lacks %q:\n%s", network, want, staged.stdout)
			}
		}
		if network != strings.Contains(staged.stdout, "etc ./ssl/") && fileExists("/etc/ssl/certs") {
			t.Errorf("network %v: /etc/ssl in the sandbox: %v", network, !network)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Staged under the umask of a caller that keeps its files private (an in-process dispatch
// runs with the CLI's), the directories still let the sandbox user through: the worker runs
// and reads /etc and /dev as it does under 022.
func TestStage_PrivateUmask(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	r := run(t, p, compute.Spec{ID: "umask", Argv: []string{"sh", "-c", layoutScript}, Network: true, RunAs: testRunAs})
	syscall.Umask(old)
	for _, want := range []string{"etc ./passwd", "etc ./ssl/certs/", "dev null (char)", "null writes", "passwd reads", "pts has ptmx"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("staged under umask 0077 the sandbox lacks %q (exit %+v):\n%s\n%s", want, r.exit, r.stdout, r.stderr)
		}
	}
}

// No staged /etc entry lies inside another: its mount point would be made inside a bind,
// on the host's file system (refused there, the bind being read-only, but not to be tried).
func TestStage_EtcEntriesDisjoint(t *testing.T) {
	all := append(append([]string{}, etcAlways...), etcNetwork...)
	for _, a := range all {
		for _, b := range all {
			if a != b && strings.HasPrefix(b, a+"/") {
				t.Errorf("%s lies inside %s", b, a)
			}
		}
	}
}

// A bind into /etc (the proxy's trust file) or /dev leaves that directory to bwrap, which
// can make the bind's mount point there.
func TestStage_BindInsideLeavesItToBwrap(t *testing.T) {
	for _, c := range []struct {
		dst      string
		etc, dev bool
	}{
		{"/agora/out", true, true},
		{"/etc/ssl/certs/ca-certificates.crt", false, true},
		{"/etc", false, true},
		{"/etc/../dev/x", true, false},
		{"/etcetera", true, true},
		{"/device", true, true},
	} {
		b := []compute.Bind{{Src: "/x", Dst: c.dst}}
		if got := !bindsUnder(b, "/etc"); got != c.etc {
			t.Errorf("%s: stage /etc = %v, want %v", c.dst, got, c.etc)
		}
		if got := !bindsUnder(b, "/dev"); got != c.dev {
			t.Errorf("%s: stage /dev = %v, want %v", c.dst, got, c.dev)
		}
	}
	opts := bwrapOptions(compute.Spec{}, nil, stagedSystem{etc: "/s/etc", dev: "/s/dev"}, newFDLayout(0), false)
	if !slices.Contains(opts, "/s/etc") || !slices.Contains(opts, "/s/dev") || slices.Contains(opts, "--ro-bind-try") || slices.Contains(opts, "--dev") {
		t.Errorf("staged options: %q", opts)
	}
	if i := slices.Index(opts, "/s/dev"); i < 1 || opts[i-1] != "--dev-bind" || !slices.Contains(opts[i:], "--remount-ro") {
		t.Errorf("a staged /dev is not --dev-bind then remounted read-only: %q", opts)
	}
	if i := slices.Index(opts, "/s/etc"); i < 1 || opts[i-1] != "--ro-bind" || opts[i+1] != "/etc" {
		t.Errorf("a staged /etc is not bound read-only at /etc: %q", opts)
	}
}
