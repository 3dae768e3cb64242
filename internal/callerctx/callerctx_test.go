package callerctx_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
)

// answerEnv makes this test binary a confined caller: it answers the challenge at
// "PID:FD", prints "ok SECRET" or "err WHY", then waits for its stdin to close (so that the
// test can read its /proc entries while it lives).
const answerEnv = "CALLERCTX_TEST_ANSWER"

func TestMain(m *testing.M) {
	agoratest.LandlockExec()
	if ch := os.Getenv(answerEnv); ch != "" {
		pid, fd, _ := strings.Cut(ch, ":")
		p, _ := strconv.Atoi(pid)
		f, _ := strconv.Atoi(fd)
		if secret, err := callerctx.Answer(int32(p), f); err != nil {
			fmt.Printf("err %v\n", err)
		} else {
			fmt.Printf("ok %s\n", secret)
		}
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRead_SelfTwoWays(t *testing.T) {
	self, err := callerctx.Read(0)
	if err != nil {
		t.Fatal(err)
	}
	byPID, err := callerctx.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := self.Differs(byPID); d != "" {
		t.Errorf("this process differs from itself: %s", d)
	}
	if self.CapEff == "" || self.NoNewPrivs == "" || self.Seccomp == "" {
		t.Errorf("fields missing: %+v", self)
	}
	if _, err := callerctx.Read(1 << 22); err == nil {
		t.Error("a process that does not exist was read")
	}
}

func TestDiffers_NamesEachField(t *testing.T) {
	base := callerctx.Security{CapInh: "0", CapPrm: "1", CapEff: "1", CapBnd: "1", CapAmb: "0", NoNewPrivs: "0", Seccomp: "0", SeccompFilters: "0"}
	for want, change := range map[string]func(*callerctx.Security){
		"CapEff":          func(s *callerctx.Security) { s.CapEff = "0" },
		"CapBnd":          func(s *callerctx.Security) { s.CapBnd = "0" },
		"CapAmb":          func(s *callerctx.Security) { s.CapAmb = "1" },
		"no_new_privs":    func(s *callerctx.Security) { s.NoNewPrivs = "1" },
		"seccomp mode":    func(s *callerctx.Security) { s.Seccomp = "2" },
		"seccomp filters": func(s *callerctx.Security) { s.SeccompFilters = "1" },
		"LSM label":       func(s *callerctx.Security) { s.LSM = "unconfined_t" },
		"AppArmor":        func(s *callerctx.Security) { s.AppArmor = "agent (enforce)" },
	} {
		c := base
		change(&c)
		if d := c.Differs(base); !strings.Contains(d, want) {
			t.Errorf("changed %s: Differs says %q", want, d)
		}
	}
	if d := base.Differs(base); d != "" {
		t.Errorf("equal contexts differ: %s", d)
	}
	// Two processes under one seccomp filter each: the programs may differ, and /proc cannot
	// tell.
	filtered := base
	filtered.Seccomp, filtered.SeccompFilters = "2", "1"
	if d := filtered.Differs(filtered); !strings.Contains(d, "seccomp") {
		t.Errorf("two filtered contexts of one count: Differs says %q, want them declined", d)
	}
}

func TestProver_OneUseOnePeerInTime(t *testing.T) {
	var p callerctx.Prover
	now := time.Unix(1_800_000_000, 0)
	me := int32(os.Getpid())
	fd, err := p.Issue(me, now)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := callerctx.Answer(me, fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(me, fd, secret, now.Add(time.Second)); err != nil {
		t.Fatalf("the right answer: %v", err)
	}
	if err := p.Check(me, fd, secret, now.Add(time.Second)); err == nil {
		t.Error("an answer was taken twice")
	}
	if p.Pending() != 0 {
		t.Errorf("%d challenges left open", p.Pending())
	}
	for name, c := range map[string]struct {
		peer  int32
		wrong bool
		after time.Duration
	}{
		"another process":   {peer: me + 1},
		"a wrong secret":    {peer: me, wrong: true},
		"too late":          {peer: me, after: callerctx.ProofTTL + time.Second},
		"a clock gone back": {peer: me, after: -time.Minute},
	} {
		fd, err := p.Issue(me, now)
		if err != nil {
			t.Fatal(err)
		}
		secret, err := callerctx.Answer(me, fd)
		if err != nil {
			t.Fatal(err)
		}
		if c.wrong {
			secret = strings.Repeat("0", 64)
		}
		if err := p.Check(c.peer, fd, secret, now.Add(c.after)); err == nil {
			t.Errorf("%s: the answer was taken", name)
		}
		if c.peer != me {
			// Another process's answer leaves the challenge to its own (it
			// could otherwise burn a CLI's challenge by naming its descriptor).
			if err := p.Check(me, fd, secret, now); err != nil {
				t.Errorf("%s: the challenge's own process could not answer it after: %v", name, err)
			}
		}
		if p.Pending() != 0 {
			t.Errorf("%s: the challenge stays open after its process answered", name)
		}
	}
	// A descriptor that is no challenge (stdin, a file) is no proof.
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := callerctx.Answer(me, int(f.Fd())); err == nil {
		t.Error("a plain file's descriptor answered as a proof")
	}
}

// TestProver_Bounded: a flood of challenges keeps at most 64 descriptors open; the newest
// still answer.
func TestProver_Bounded(t *testing.T) {
	var p callerctx.Prover
	now := time.Unix(1_800_000_000, 0)
	me := int32(os.Getpid())
	var last int
	for i := range 200 {
		fd, err := p.Issue(me, now.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		last = fd
	}
	if n := p.Pending(); n != 64 {
		t.Errorf("%d challenges open, want 64", n)
	}
	secret, err := callerctx.Answer(me, last)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(me, last, secret, now.Add(time.Second)); err != nil {
		t.Errorf("the newest challenge: %v", err)
	}
}

// confined starts this test binary as a caller confined by how (nil: not confined) to answer
// a challenge of this process; it returns the caller's answer and how its security context
// differs from this process's.
func confined(t *testing.T, p *callerctx.Prover, how func(env []string, self string) *exec.Cmd) (answer, differs string) {
	t.Helper()
	me := int32(os.Getpid())
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := p.Issue(0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), fmt.Sprintf("%s=%d:%d", answerEnv, me, fd))
	cmd := how(env, self)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the confined caller said nothing: %v\n%s", err, stderr.String())
	}
	sec, err := callerctx.Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	own, err := callerctx.Read(0)
	if err != nil {
		t.Fatal(err)
	}
	answer, differs = strings.TrimSpace(line), sec.Differs(own)
	t.Logf("%v: answer %q, differs %q", cmd.Args, answer, differs)
	return answer, differs
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("SKIP: needs root: a confined caller is this process's user less what confines it")
	}
}

// TestConfinedCallers: what each confinement shows. An unconfined child of this process's
// user answers and differs in nothing; one with every capability dropped can neither answer
// (the kernel refuses it this process's descriptors) nor pass the comparison; one with
// no_new_privs answers but differs; one in a Landlock domain differs in nothing /proc shows,
// and only the challenge catches it.
func TestConfinedCallers(t *testing.T) {
	requireRoot(t)
	var p callerctx.Prover
	plain := func(env []string, self string) *exec.Cmd {
		c := exec.Command(self)
		c.Env = env
		return c
	}
	setpriv := func(args ...string) func([]string, string) *exec.Cmd {
		return func(env []string, self string) *exec.Cmd {
			c := exec.Command("setpriv", append(args, "--", self)...)
			c.Env = env
			return c
		}
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is missing: %v", err)
	}
	if a, d := confined(t, &p, plain); !strings.HasPrefix(a, "ok ") || d != "" {
		t.Errorf("an unconfined caller: answer %q, differs %q", a, d)
	}
	if a, d := confined(t, &p, setpriv("--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all")); strings.HasPrefix(a, "ok ") || !strings.Contains(d, "capabilit") {
		t.Errorf("a caller without capabilities: answer %q, differs %q; want refused and named", a, d)
	}
	if a, d := confined(t, &p, setpriv("--no-new-privs")); !strings.Contains(d, "no_new_privs") {
		t.Errorf("a no_new_privs caller: answer %q, differs %q; want no_new_privs named", a, d)
	}
	t.Run("landlock", func(t *testing.T) {
		if why := agoratest.LandlockAvailable(); why != "" {
			t.Skip("SKIP: " + why)
		}
		a, d := confined(t, &p, func(env []string, self string) *exec.Cmd {
			return agoratest.LandlockCommand([]string{"/"}, env, self)
		})
		if d != "" {
			t.Errorf("a Landlock-confined caller differs in %q: the test means to show what /proc cannot", d)
		}
		if strings.HasPrefix(a, "ok ") {
			t.Errorf("a Landlock-confined caller answered the challenge: %q", a)
		}
	})
}
