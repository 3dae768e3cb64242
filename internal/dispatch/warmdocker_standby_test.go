package dispatch_test

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/dispatch"
)

// standbyPair is a socketpair as serve makes it for a standby: the standby's end and the
// holder's (detach.Standbys).
func standbyPair(t *testing.T) (standby, holder *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// runningSlots returns the ids of the home's running slot containers.
func runningSlots(t *testing.T, cli *client.Client, home string) []string {
	t.Helper()
	res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", container.LabelHome+"="+container.HomeLabel(home))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Items {
		if string(c.State) == "running" {
			out = append(out, c.ID)
		}
	}
	return out
}

// TestDockerStandby_HeldSlot is a docker standby supervisor (what serve starts per slot) on
// podman. Attacks: a second holder of the home starting (its sweep) leaves the standby's
// ready slot standing, and cannot claim it (it holds no slot of its own: it has no
// template); the dispatch handed to the standby runs in that very container and ends as the
// cold one did. A standby whose holder goes away before a claim (EOF: serve killed) removes
// its slot container and exits without a dispatch.
func TestDockerStandby_HeldSlot(t *testing.T) {
	image := requireContainer(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root (a uid of the sandbox range per slot)")
	}
	e := newEnv(t)
	e.addDockerTarget(image)
	tg := e.home.Config.Targets["box"]
	tg.Warm = 1
	e.home.Config.Targets["box"] = tg
	e.subagent("editor", `printf 'hello\n' > greeting.txt`)
	req := dispatch.Request{Subagent: "editor", Repo: gitRepo(t, map[string]string{"README": "one\n"}), Target: "box", Timeout: 2 * time.Minute}
	cold := e.run(req) // a detached supervisor's cold dispatch: it saves the target's template
	wantFinished(t, cold)
	shape, err := dispatch.WarmShape(e.d.StateDir, "box")
	if err != nil {
		t.Fatalf("the cold docker dispatch saved no template: %v", err)
	}
	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	startStandby := func() (*net.UnixConn, *bufio.Reader, chan *dispatch.Record) {
		sc, hc := standbyPair(t)
		sb := *e.d
		sb.Warm = nil
		done := make(chan *dispatch.Record, 1)
		go func() {
			rec, err := sb.Standby(t.Context(), "box", sc, nil)
			if err != nil {
				t.Errorf("standby: %v", err)
			}
			done <- rec
		}()
		r := bufio.NewReader(hc)
		hc.SetReadDeadline(time.Now().Add(90 * time.Second))
		l, err := r.ReadString('\n')
		if err != nil || l != "ready "+shape+"\n" {
			t.Fatalf("standby said %q, %v; want ready %s", l, err, shape)
		}
		hc.SetReadDeadline(time.Time{})
		return hc, r, done
	}

	hc, r, done := startStandby()
	ready := runningSlots(t, cli, filepath.Dir(e.d.StateDir))
	if len(ready) != 1 {
		t.Fatalf("running slot containers %v, want the standby's one", ready)
	}
	// A second holder of the home starts: its sweep spares the standby's slot.
	d2 := *e.d
	d2.Warm = nil
	w2, err := d2.StartWarm(t.Context())
	if err != nil || w2 == nil {
		t.Fatalf("second holder: %v, %v", w2, err)
	}
	defer w2.Close()
	if err := d2.SweepWarm(t.Context()); err != nil {
		t.Fatal(err)
	}
	if now := runningSlots(t, cli, filepath.Dir(e.d.StateDir)); len(now) != 1 || now[0] != ready[0] {
		t.Fatalf("after a second holder's sweep the slot containers are %v, want %v", now, ready)
	}
	// The dispatch handed to the standby runs in its container.
	acc, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "editor", Repo: req.Repo, Target: "box", Timeout: 2 * time.Minute, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Write([]byte("claim " + acc.ID + "\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ReadString('\n'); err != nil || l != "claimed "+acc.ID+"\n" {
		t.Fatalf("standby answered %q, %v", l, err)
	}
	var hot *dispatch.Record
	select {
	case hot = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the standby's dispatch did not end within 2 minutes")
	}
	wantFinished(t, hot)
	if hot.ProviderTaskID != "docker:"+ready[0] {
		t.Errorf("the standby's dispatch ran as %q, not in its slot container %s", hot.ProviderTaskID, ready[0])
	}
	if cold.Isolation != hot.Isolation || e.patch(cold) != e.patch(hot) {
		t.Errorf("isolation %q / %q, patches:\n%s\n%s", cold.Isolation, hot.Isolation, e.patch(cold), e.patch(hot))
	}
	if c := boxCounts(w2); c.Claimed != 0 {
		t.Errorf("the second holder counts %+v: it claimed a slot", c)
	}

	// The holder goes away before a claim: the standby removes its slot and exits.
	hc, _, done = startStandby()
	second := runningSlots(t, cli, filepath.Dir(e.d.StateDir))
	if len(second) != 1 || second[0] == ready[0] {
		t.Fatalf("running slot containers %v, want a new standby's one", second)
	}
	hc.Close()
	select {
	case rec := <-done:
		if rec != nil {
			t.Fatalf("a standby whose holder left ran dispatch %s", rec.ID)
		}
	case <-time.After(time.Minute):
		t.Fatal("the standby did not exit within a minute of its holder's EOF")
	}
	if now := runningSlots(t, cli, filepath.Dir(e.d.StateDir)); len(now) != 0 {
		t.Fatalf("slot containers %v still run after their standby's holder left", now)
	}
	if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(e.d.StateDir), "gateway", "slotfiles")); len(ents) != 0 {
		t.Errorf("slot places left: %v", ents)
	}
}
