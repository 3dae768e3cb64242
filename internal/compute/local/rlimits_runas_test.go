package local

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// TestProvider_Start_RunAsLimitsWithoutPrlimitExec: a root provider sets a RunAs sandbox's
// rlimits itself, with prlimit(2) on the blocked sandbox process, so no prlimit(1) is exec'd
// in it (that exec costs a dispatch ~1.2 ms). Every limit is in place soft and hard alike
// before the command runs, and the sandbox cannot raise any hard limit, not even by one.
// It runs with no prlimit(1) to be found: a root provider needs none for a RunAs sandbox
// (no ErrNoPrlimit).
func TestProvider_Start_RunAsLimitsWithoutPrlimitExec(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		t.Skip("SKIP: the sandbox's raise attempts use /usr/bin/prlimit, which is not installed (apt-get install util-linux)")
	}
	lim := compute.Limits{MaxProcs: 64, FileSize: 1 << 20, Memory: 2 << 30, Timeout: time.Minute}
	l := resolveLimits(lim)
	want := map[string]uint64{
		"Max processes": l.nproc, "Max file size": l.fsize, "Max address space": l.as,
		"Max core file size": 0, "Max open files": l.nofile,
	}
	// Each hard limit raised by one, by prlimit(1) on itself: every attempt must fail.
	var script strings.Builder
	script.WriteString("cat /proc/self/limits\n")
	for _, r := range l.rlimitSet() {
		fmt.Fprintf(&script, "/usr/bin/prlimit --%s=%d:%d true 2>/dev/null && echo RAISED %s\n", r.name, r.value, r.value+1, r.name)
	}
	// No prlimit(1) anywhere the provider looks: only prlimit(2) can set the limits.
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	dir := privateDir(t, testRunAs)
	var out, errOut syncBuffer
	h, err := p.Start(t.Context(), compute.Spec{
		ID: "rlimits", Argv: []string{"sh", "-c", script.String() + "while [ ! -e /rw/go ]; do sleep 0.02; done"}, Env: []string{"PATH=/usr/bin:/bin"},
		RunAs: testRunAs, Limits: lim, Stdout: &out, Stderr: &errOut,
		Binds: []compute.Bind{{Src: filepath.Join(dir, "rw"), Dst: "/rw", Writable: true}},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	// While the sandbox runs, the thread that started it is still alive: its real ids, and
	// every other thread's, are root's again.
	agoratest.WaitFor(t, 30*time.Second, "the sandbox's limits on stdout", func() bool { return strings.Contains(out.String(), "Max open files") })
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tids {
		tid := e.Name()
		b, err := os.ReadFile(filepath.Join("/proc/self/task", tid, "status"))
		if err != nil {
			continue // the thread ended
		}
		if m := regexp.MustCompile(`(?m)^(Uid|Gid):\t(.*)$`).FindAllStringSubmatch(string(b), -1); len(m) != 2 ||
			m[0][2] != "0\t0\t0\t0" || m[1][2] != "0\t0\t0\t0" {
			t.Errorf("thread %s has ids %q, want root's throughout", tid, m)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "rw", "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exit, err := h.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("Wait = %+v, %v\nstdout:\n%s\nstderr:\n%s", exit, err, out.String(), errOut.String())
	}
	for label, v := range want {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^%s +%d +%d `, regexp.QuoteMeta(label), v, v))
		if !re.MatchString(out.String()) {
			t.Errorf("%s is not %d soft and hard inside the sandbox:\n%s", label, v, out.String())
		}
	}
	if strings.Contains(out.String(), "RAISED") {
		t.Errorf("the sandbox raised a hard limit:\n%s", out.String())
	}
	if !strings.Contains(exit.Isolation, "rlimits") || !strings.Contains(exit.Isolation, "runas") {
		t.Errorf("isolation %q, want rlimits and runas", exit.Isolation)
	}
}
