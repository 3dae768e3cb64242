package service_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// dockerHost is the Docker API the tests use: DOCKER_HOST, else the socket scripts/podman.sh
// serves podman's API on.
func dockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///run/agora-podman.sock"
}

// dockerWarmServedEnv is an env whose docker target "box" (the toolchain image) keeps n warm
// slots, with orch serve running: it holds them as docker standby supervisors. One cold plan on box teaches the target its shape; the function
// returns once n standbys each have a running slot container.
func dockerWarmServedEnv(t *testing.T, n int) (*env, *client.Client, func() *exec.Cmd) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root (each slot runs as a uid of the sandbox range)")
	}
	requireBwrap(t)
	cli, err := client.New(client.WithHost(dockerHost()), client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cli.Ping(ctx, client.PingOptions{})
		cancel()
	}
	if err != nil {
		t.Skipf("SKIP: no Docker API at %s: %v: run scripts/podman.sh", dockerHost(), err)
	}
	t.Cleanup(func() { cli.Close() })
	image := os.Getenv("AGORA_TOOLCHAIN_IMAGE")
	if image == "" {
		script, _ := filepath.Abs("../../../scripts/images.sh")
		out, _ := exec.Command(script, "toolchain").Output()
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "AGORA_TOOLCHAIN_IMAGE="); ok {
				image = v
			}
		}
	}
	if image == "" {
		t.Skip("SKIP: no toolchain image: run scripts/images.sh toolchain (or set AGORA_TOOLCHAIN_IMAGE)")
	}
	e := newEnv(t)
	e.vars = append(e.vars, "DOCKER_HOST="+dockerHost())
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  box:\n    provider: docker\n    image: " + image + "\n    warm: " + strconv.Itoa(n) + "\n")
	must(t, err)
	must(t, f.Close())
	cur := e.serve()
	t.Cleanup(func() {
		cur.Process.Signal(syscall.SIGTERM)
		cur.Wait()
		// Whatever a failed test left: the home's slot containers.
		for _, c := range slotContainers(t, cli, e) {
			cli.ContainerRemove(context.Background(), c.id, client.ContainerRemoveOptions{Force: true})
		}
	})
	e.runBoxPlan("cold")
	waitDockerStandbys(t, e, cli, n)
	return e, cli, func() *exec.Cmd { return cur }
}

// runBoxPlan runs a one-task plan of the worker subagent on target box and returns its
// dispatch id.
func (e *env) runBoxPlan(name string) string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), name+".yaml")
	must(e.t, os.WriteFile(p, []byte("version: 1\nname: "+name+"\ndefaults: {target: box}\ntasks:\n  - id: t0\n    subagent: worker\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
	run := waitRun(e.t, e.client(), runID, 3*time.Minute)
	if run.State != lifecycle.RunSucceeded {
		e.t.Fatalf("run %s: %s, tasks %+v", name, run.State, run.Tasks)
	}
	_, byID := e.statusOf(runID)
	return byID["t0"].DispatchID
}

type slotBox struct {
	id, slot, holder, state string
}

// slotContainers lists the home's slot containers (by agora.home).
func slotContainers(t *testing.T, cli *client.Client, e *env) []slotBox {
	t.Helper()
	opts := client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", container.LabelHome+"="+container.HomeLabel(e.home))}
	// Podman fails a list when a listed container's process exits while it reads its cgroup
	// ("read /proc/N/cgroup: no such process"); a moment later the list holds.
	var res client.ContainerListResult
	var err error
	agoratest.Poll(5*time.Second, func() bool {
		res, err = cli.ContainerList(context.Background(), opts)
		return err == nil
	})
	must(t, err)
	var out []slotBox
	for _, c := range res.Items {
		out = append(out, slotBox{id: c.ID, slot: c.Labels[container.LabelSlot], holder: c.Labels[container.LabelHolder], state: string(c.State)})
	}
	return out
}

// readyBoxes are the running slot containers of the home by holder pid: each a standby's.
func readyBoxes(t *testing.T, cli *client.Client, e *env) map[int]slotBox {
	t.Helper()
	out := map[int]slotBox{}
	for _, c := range slotContainers(t, cli, e) {
		pid, err := strconv.Atoi(strings.TrimPrefix(c.holder, "pid-"))
		if err == nil && c.state == "running" {
			out[pid] = c
		}
	}
	return out
}

func waitDockerStandbys(t *testing.T, e *env, cli *client.Client, n int) {
	t.Helper()
	agoratest.WaitFor(t, 2*time.Minute, strconv.Itoa(n)+" docker standbys with a running slot container", func() bool {
		sb, boxes := standbys(t, e), readyBoxes(t, cli, e)
		held := 0
		for _, pid := range sb {
			if _, ok := boxes[pid]; ok {
				held++
			}
		}
		return held >= n
	})
}

func alive(pid int) bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestServe_DockerWarmSlotsHeldByServe: orch serve holds a docker target's `warm: 2` as
// standby supervisors, each with its own slot container (its holder label names it) and
// gateway; a second standby starting (its sweep) leaves the first's slot standing. A task
// runs in a ready standby's container (the record's task id is that container, its
// supervisor that standby) with the cold dispatch's state, isolation and audit kinds; doctor
// counts it. Attacks: a standby killed with -9 has its slot container swept, never claimed; serve killed with -9 has every unclaimed slot removed by
// its standbys, and a restarted serve's dispatch runs in a standby of its own.
func TestServe_DockerWarmSlotsHeldByServe(t *testing.T) {
	e, cli, serve := dockerWarmServedEnv(t, 2)
	db := openAgoraDB(t, e)
	var coldID string
	must(t, db.SQL().QueryRow(`SELECT id FROM dispatches ORDER BY created_at, id LIMIT 1`).Scan(&coldID))

	ready := readyBoxes(t, cli, e)
	if len(ready) != 2 {
		t.Fatalf("slot containers by holder %v, want 2 (one per standby)", ready)
	}
	id := e.runBoxPlan("warm")
	pid := supervisorPID(t, db, id)
	box, ok := ready[pid]
	if !ok {
		t.Fatalf("dispatch %s was supervised by %d, not by a ready standby %v", id, pid, ready)
	}
	var task, warmIso, warmState, coldIso, coldState string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id, isolation, state FROM dispatches WHERE id = ?`, id).Scan(&task, &warmIso, &warmState))
	must(t, db.SQL().QueryRow(`SELECT isolation, state FROM dispatches WHERE id = ?`, coldID).Scan(&coldIso, &coldState))
	if task != "docker:"+box.id {
		t.Errorf("warm dispatch ran as %q, not in its standby's slot container %s", task, box.id)
	}
	if coldIso != warmIso || coldState != warmState {
		t.Errorf("warm dispatch %s/%q, cold %s/%q", warmState, warmIso, coldState, coldIso)
	}
	if cold, warm := auditKinds(t, db, coldID), auditKinds(t, db, id); strings.Join(cold, " ") != strings.Join(warm, " ") {
		t.Errorf("audit of the warm dispatch:\n%v\nof the cold one:\n%v", warm, cold)
	}
	agoratest.WaitFor(t, 30*time.Second, "doctor to count the docker claim", func() bool {
		cmd := exec.Command(agoraBin, "doctor")
		cmd.Env = e.vars
		out, _ := cmd.CombinedOutput()
		return strings.Contains(string(out), "box: warm 2/2 ready (claimed 1, cold ") &&
			strings.Contains(string(out), "held by pid "+strconv.Itoa(serve().Process.Pid))
	})

	// A ready standby killed with -9: its container waits on a gateway that is gone; serve
	// sweeps it when the standby's process exits (and the new standby's start would), and
	// refills.
	waitDockerStandbys(t, e, cli, 2)
	ready = readyBoxes(t, cli, e)
	var victim int
	for p := range ready {
		victim = p
		break
	}
	must(t, syscall.Kill(victim, syscall.SIGKILL))
	agoratest.WaitFor(t, 2*time.Minute, "the killed standby's slot container to be swept", func() bool {
		for _, c := range slotContainers(t, cli, e) {
			if c.id == ready[victim].id {
				return false
			}
		}
		return true
	})
	waitDockerStandbys(t, e, cli, 2)

	// serve killed with -9: its standbys read EOF and remove their slots; nothing is left for
	// anyone to claim, and a restarted serve's dispatch runs in a standby of its own.
	old := readyBoxes(t, cli, e)
	must(t, serve().Process.Signal(syscall.SIGKILL))
	serve().Wait()
	agoratest.WaitFor(t, time.Minute, "the killed serve's standbys to exit and remove their slots", func() bool {
		for p := range old {
			if alive(p) {
				return false
			}
		}
		return len(slotContainers(t, cli, e)) == 0
	})
	cmd := e.serve()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	waitDockerStandbys(t, e, cli, 2)
	id = e.runBoxPlan("after")
	if p := supervisorPID(t, db, id); old[p].id != "" {
		t.Fatalf("a standby of the killed serve (%d) supervised %s", p, id)
	}
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, id).Scan(&task))
	for _, c := range old {
		if task == "docker:"+c.id {
			t.Fatalf("dispatch %s ran in the killed serve's slot container %s", id, c.id)
		}
	}
}
