package dispatch_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// standbyEnv is an env whose local target keeps a warm slot, after one cold dispatch of
// "fds" (it lists its descriptors) saved the target's template, as a detached supervisor
// does. It returns that cold dispatch.
func standbyEnv(t *testing.T) (*env, *dispatch.Record) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	e := newEnv(t)
	tg := e.d.Config.Targets[config.DefaultTarget]
	tg.Warm = 1
	e.d.Config.Targets[config.DefaultTarget] = tg
	e.subagent("fds", `ls /proc/self/fd | tr '\n' ' '`)
	cold := e.run(dispatch.Request{Subagent: "fds"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	return e, cold
}

// holder is the test's end of a standby's socketpair.
type holder struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	done chan standbyResult
}

type standbyResult struct {
	r   *dispatch.Record
	err error
}

// startStandby runs Dispatcher.Standby of the local target on one end of a socketpair.
func startStandby(t *testing.T, e *env) *holder {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "standby")
		if conns[i], err = net.FileConn(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	h := &holder{t: t, conn: conns[0], r: bufio.NewReader(conns[0]), done: make(chan standbyResult, 1)}
	go func() {
		defer conns[1].Close()
		r, err := e.d.Standby(t.Context(), config.DefaultTarget, conns[1], nil)
		h.done <- standbyResult{r, err}
	}()
	t.Cleanup(func() { h.conn.Close(); <-h.done })
	return h
}

func (h *holder) say(line string) {
	h.t.Helper()
	if _, err := h.conn.Write([]byte(line + "\n")); err != nil {
		h.t.Fatal(err)
	}
}

func (h *holder) hear() string {
	h.t.Helper()
	h.conn.SetReadDeadline(time.Now().Add(time.Minute))
	l, err := h.r.ReadString('\n')
	if err != nil {
		h.t.Fatalf("standby: %v (read %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

func (h *holder) result() standbyResult {
	h.t.Helper()
	select {
	case r := <-h.done:
		h.done <- r
		return r
	case <-time.After(time.Minute):
		h.t.Fatal("the standby did not return within a minute")
		return standbyResult{}
	}
}

func slotDirs(t *testing.T, e *env) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(e.d.StateDir, ".warm", config.DefaultTarget, "slot-*"))
	return dirs
}

// TestStandby_OneClaimThenRefused: a standby takes the first dispatch id its holder sends,
// runs it in its slot to the end (the same descriptors as cold: nothing of the holder's
// reaches the sandbox), and refuses every later id.
func TestStandby_OneClaimThenRefused(t *testing.T) {
	e, cold := standbyEnv(t)
	h := startStandby(t, e)
	if l := h.hear(); !strings.HasPrefix(l, "ready ") {
		t.Fatalf("standby said %q, want ready SHAPE", l)
	}
	dirs := slotDirs(t, e)
	if len(dirs) != 1 {
		t.Fatalf("slot directories %v, want one", dirs)
	}
	task, err := os.ReadFile(filepath.Join(dirs[0], "task"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "fds", Timeout: 30 * time.Second, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "fds", Timeout: 30 * time.Second, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.say("claim " + r.ID)
	if l := h.hear(); l != "claimed "+r.ID {
		t.Fatalf("standby answered %q, want claimed %s", l, r.ID)
	}
	h.say("claim " + other.ID)
	// The refusal, and the word that the dispatch ended, in either order: the end is
	// said once its terminal state is committed, so the record read then is terminal.
	for refused, ended := false, false; !refused || !ended; {
		switch l := h.hear(); {
		case l == "refused standby already claimed" && !refused:
			refused = true
		case l == dispatch.StandbyEnded && !ended:
			ended = true
			if now, err := e.d.Records.Get(t.Context(), r.ID); err != nil || !lifecycle.DispatchEnded(now.State) {
				t.Fatalf("standby said %q with the record %+v, %v; want it terminal", l, now, err)
			}
		default:
			t.Fatalf("after a second id: standby said %q (refused %v, ended %v)", l, refused, ended)
		}
	}
	res := h.result()
	if res.err != nil || res.r == nil || res.r.State != lifecycle.DispatchFinished {
		t.Fatalf("standby returned %+v, %v; want the claimed dispatch finished", res.r, res.err)
	}
	if res.r.ProviderTaskID != string(task) {
		t.Errorf("the claimed dispatch ran as task %q, not in the standby's slot %q", res.r.ProviderTaskID, task)
	}
	if got, want := e.stdout(res.r), e.stdout(cold); got != want {
		t.Errorf("descriptors in the warm sandbox %q, cold %q", got, want)
	}
	if res.r.Isolation != cold.Isolation {
		t.Errorf("isolation warm %q, cold %q", res.r.Isolation, cold.Isolation)
	}
	if o, err := e.d.Records.Get(t.Context(), other.ID); err != nil || o.State != lifecycle.DispatchAccepted {
		t.Errorf("the refused id's dispatch: %+v, %v; want it untouched (accepted)", o, err)
	}
}

// TestStandby_HolderGoneKillsSlot: a standby whose holder closes its end before any claim
// (serve stopped or was killed) kills its slot, removes its directory and returns nothing.
func TestStandby_HolderGoneKillsSlot(t *testing.T) {
	e, _ := standbyEnv(t)
	h := startStandby(t, e)
	if l := h.hear(); !strings.HasPrefix(l, "ready ") {
		t.Fatalf("standby said %q, want ready SHAPE", l)
	}
	if n := len(slotDirs(t, e)); n != 1 {
		t.Fatalf("%d slot directories while the standby waits, want 1", n)
	}
	h.conn.Close()
	res := h.result()
	if res.err != nil || res.r != nil {
		t.Fatalf("standby returned %+v, %v; want nothing", res.r, res.err)
	}
	if dirs := slotDirs(t, e); len(dirs) != 0 {
		t.Errorf("slot directories left after the holder went: %v", dirs)
	}
}

// TestStandby_RefusesWhatIsNotAClaim: a line that is not "claim ID", or an id of another
// form (a path, an option), is refused and nothing runs; the slot is killed.
func TestStandby_RefusesWhatIsNotAClaim(t *testing.T) {
	e, _ := standbyEnv(t)
	for _, line := range []string{"claim ../../etc", "claim --help", "CLAIM X", "claim ", "claim " + strings.Repeat("a", 200)} {
		h := startStandby(t, e)
		if l := h.hear(); !strings.HasPrefix(l, "ready ") {
			t.Fatalf("standby said %q, want ready SHAPE", l)
		}
		h.say(line)
		if l := h.hear(); !strings.HasPrefix(l, "refused ") {
			t.Errorf("%q: standby answered %q, want a refusal", line, l)
		}
		if res := h.result(); res.err == nil || res.r != nil {
			t.Errorf("%q: standby returned %+v, %v; want an error and no dispatch", line, res.r, res.err)
		}
		if dirs := slotDirs(t, e); len(dirs) != 0 {
			t.Errorf("%q: slot directories left: %v", line, dirs)
		}
	}
}

// TestStandby_PlantedTemplateFitsNoDispatch: a template.json planted with a host file bound
// into the sandbox (one more bind outside /agora) makes a slot whose shape no real dispatch
// has: the claimed dispatch runs cold, in a sandbox of its own spec, and never sees the file.
func TestStandby_PlantedTemplateFitsNoDispatch(t *testing.T) {
	e, _ := standbyEnv(t)
	e.subagent("peek", `cat /planted 2>/dev/null || echo absent`)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.d.StateDir, ".warm", config.DefaultTarget, "template.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	tmpl["binds"] = append(tmpl["binds"].([]any), map[string]any{"Src": secret, "Dst": "/planted", "Writable": false, "Result": false})
	if b, err = json.Marshal(tmpl); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h := startStandby(t, e)
	if l := h.hear(); !strings.HasPrefix(l, "ready ") {
		t.Fatalf("standby said %q, want ready SHAPE", l)
	}
	dirs := slotDirs(t, e)
	if len(dirs) != 1 {
		t.Fatalf("slot directories %v, want one", dirs)
	}
	task, err := os.ReadFile(filepath.Join(dirs[0], "task"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "peek", Timeout: 30 * time.Second, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.say("claim " + r.ID)
	if l := h.hear(); l != "claimed "+r.ID {
		t.Fatalf("standby answered %q", l)
	}
	res := h.result()
	if res.err != nil || res.r == nil || res.r.State != lifecycle.DispatchFinished {
		t.Fatalf("standby returned %+v, %v", res.r, res.err)
	}
	if res.r.ProviderTaskID == string(task) {
		t.Errorf("the dispatch ran in the planted slot %s", task)
	}
	if out := e.stdout(res.r); strings.TrimSpace(out) != "absent" {
		t.Errorf("the dispatch read %q at /planted, want nothing there", out)
	}
}
