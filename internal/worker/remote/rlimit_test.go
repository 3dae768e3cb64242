package remote

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// rlimitChildEnv makes the test binary TestRlimitChild: the worker's side of
// TestApplyRlimits_AgentInherits.
const rlimitChildEnv = "AGORA_TEST_RLIMIT_CHILD"

// The attack in a pod: an agent forks without end, or fills the volume through one file, or
// raises its limits back. The worker applies AGORA_RLIMITS to itself before the agent runs;
// the agent (a shell here, as another uid, as in a pod) inherits them, cannot raise them,
// and is stopped by them. No cluster is needed: this is the worker's own code on this host.
func TestApplyRlimits_AgentInherits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to run the agent as a uid of its own: RLIMIT_NPROC never binds root")
	}
	uid := 0x7000f000 + os.Getpid()%4096
	// Not t.TempDir: its parent is root's alone (0700).
	dir, err := os.MkdirTemp("", "agora-rlimit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRlimitChild$")
	cmd.Env = []string{
		rlimitChildEnv + "=" + strconv.Itoa(uid), "PATH=/usr/bin:/bin", "DIR=" + dir,
		remote.RlimitsEnv + "=nproc=8,fsize=4096,nofile=64",
	}
	out, err := cmd.CombinedOutput()
	t.Logf("agent:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	s := string(out)
	for _, want := range []string{
		"env=unset\n", "raise=refused\n", "big=4096\n",
		"Max processes             8                    8",
		"Max file size             4096                 4096",
		"Max open files            64                   64",
		"Max core file size        0                    0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("agent output lacks %q", want)
		}
	}
	forked := -1
	fmt.Sscanf(s[strings.Index(s, "forked=")+len("forked="):], "%d", &forked)
	if forked < 1 || forked > 7 {
		t.Errorf("the agent ran %d background processes under nproc 8 (itself and its subshell count too)", forked)
	}
}

// TestRlimitChild is the worker in TestApplyRlimits_AgentInherits: it applies the limits as
// the worker does, becomes the pod's uid, and runs the agent's probe.
func TestRlimitChild(t *testing.T) {
	uidEnv := os.Getenv(rlimitChildEnv)
	if uidEnv == "" {
		t.Skip("SKIP: the worker side of TestApplyRlimits_AgentInherits, run only by it")
	}
	uid, _ := strconv.Atoi(uidEnv)
	if err := ApplyRlimits(); err != nil {
		t.Fatalf("ApplyRlimits: %v", err)
	}
	os.Unsetenv(rlimitChildEnv)
	if err := syscall.Setgroups(nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgid(uid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setuid(uid); err != nil {
		t.Fatal(err)
	}
	raise := "raise=refused"
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 4096, Max: 4096}) == nil {
		raise = "raise=ok"
	}
	big := filepath.Join(os.Getenv("DIR"), "big")
	script := `echo "env=${AGORA_RLIMITS:-unset}"; echo ` + raise + `
grep -E '^Max (processes|file size|open files|core file size)' /proc/self/limits
( n=0; while [ $n -lt 50 ]; do sleep 5 >/dev/null 2>&1 & n=$((n+1)); echo $n > "$DIR/n"; done ) 2>/dev/null
read n < "$DIR/n"; echo "forked=$n"
head -c 8192 /dev/zero > ` + big + ` 2>/dev/null; echo "big=$(wc -c < ` + big + `)"`
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ())
	t.Fatalf("exec sh: %v", err)
}
