package service_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// warmServedEnv is an env whose local target keeps n warm slots, with orch serve running
// (it holds them as standby supervisors). One cold run of the "worker" subagent teaches
// the target its shape first; the function returns once n standbys are ready.
func warmServedEnv(t *testing.T, n int) (*env, func() *os.Process) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	requireBwrap(t)
	e := newEnv(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  local:\n    warm: " + strconv.Itoa(n) + "\n")
	must(t, err)
	must(t, f.Close())
	serve := e.serve()
	cur := serve
	t.Cleanup(func() {
		cur.Process.Signal(syscall.SIGTERM)
		cur.Wait()
		// A standby that supervised a dispatch unmounts its slot's claim as it exits, after the
		// dispatch's end is recorded (and after a serve killed with -9): the home's directory
		// is removed only once every standby of it is gone.
		agoratest.WaitFor(t, time.Minute, "the home's standby supervisors to exit", func() bool { return len(standbys(t, e)) == 0 })
	})
	e.runPlan("cold", "worker")
	waitStandbys(t, e, n)
	return e, func() *os.Process { return cur.Process }
}

// runPlan submits a plan of one task per subagent (in order, each after the last) and waits
// for it to succeed; it returns the tasks' dispatch ids.
func (e *env) runPlan(name string, subagents ...string) []string {
	e.t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\nname: " + name + "\ntasks:\n")
	for i, s := range subagents {
		b.WriteString("  - id: t" + strconv.Itoa(i) + "\n    subagent: " + s + "\n")
		if i > 0 {
			b.WriteString("    needs: [t" + strconv.Itoa(i-1) + "]\n")
		}
	}
	p := filepath.Join(e.t.TempDir(), name+".yaml")
	must(e.t, os.WriteFile(p, []byte(b.String()), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
	run := waitRun(e.t, e.client(), runID, 2*time.Minute)
	if run.State != lifecycle.RunSucceeded {
		e.t.Fatalf("run %s: %s, tasks %+v", name, run.State, run.Tasks)
	}
	_, byID := e.statusOf(runID)
	var ids []string
	for i := range subagents {
		ids = append(ids, byID["t"+strconv.Itoa(i)].DispatchID)
	}
	return ids
}

// standbys returns the pids of the running standby supervisors of the home.
func standbys(t *testing.T, e *env) []int {
	t.Helper()
	return agoratest.StandbyPIDs(e.home)
}

// readySlots counts the slot directories of the local target whose sandbox has started.
func readySlots(t *testing.T, e *env) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(e.home, "dispatches", ".warm", "local", "slot-*"))
	var out []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "task")); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// slotTasks returns the task ids of the ready slots' sandboxes.
func slotTasks(t *testing.T, e *env) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, d := range readySlots(t, e) {
		if b, err := os.ReadFile(filepath.Join(d, "task")); err == nil {
			out[string(b)] = true
		}
	}
	return out
}

func waitStandbys(t *testing.T, e *env, n int) {
	t.Helper()
	agoratest.WaitFor(t, time.Minute, strconv.Itoa(n)+" idle standby supervisors with a ready slot", func() bool {
		// The database is read only once there are enough standbys and slots to count.
		return len(standbys(t, e)) >= n && len(readySlots(t, e)) >= n && len(idleStandbys(t, e)) >= n
	})
}

// idleStandbys is standbys less those that supervised a dispatch already: a standby that
// claimed a slot for a dispatch (the one before, say) stays a "supervise --standby" process
// until it has cleaned up after it, and is not the standby the next dispatch goes to.
func idleStandbys(t *testing.T, e *env) []int {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	defer db.Close()
	rows, err := db.SQL().Query(`SELECT supervisor FROM dispatches`)
	must(t, err)
	defer rows.Close()
	used := map[int]bool{}
	for rows.Next() {
		var sup string
		must(t, rows.Scan(&sup))
		if pid, err := strconv.Atoi(strings.SplitN(sup, ":", 2)[0]); err == nil {
			used[pid] = true
		}
	}
	must(t, rows.Err())
	var out []int
	for _, pid := range standbys(t, e) {
		if !used[pid] {
			out = append(out, pid)
		}
	}
	return out
}

func supervisorPID(t *testing.T, db *store.DB, id string) int {
	t.Helper()
	var sup string
	must(t, db.SQL().QueryRow(`SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&sup))
	pid, err := strconv.Atoi(strings.SplitN(sup, ":", 2)[0])
	must(t, err)
	return pid
}

func auditKinds(t *testing.T, db *store.DB, id string) []string {
	t.Helper()
	rows, err := db.SQL().Query(`SELECT kind FROM audit_entries WHERE subject LIKE '%' || ? ORDER BY seq`, id)
	must(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		must(t, rows.Scan(&k))
		out = append(out, k)
	}
	must(t, rows.Err())
	return out
}

func openAgoraDB(t *testing.T, e *env) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func contains(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// TestServe_WarmSlotsRunInStandbys: with `warm: 2`, orch serve keeps two standby
// supervisors; a plan's tasks after the first cold one run in them (each dispatch's
// supervisor is a standby started before the task), each standby once, and the dispatch's
// record and audit are those of a cold one.
func TestServe_WarmSlotsRunInStandbys(t *testing.T) {
	e, serve := warmServedEnv(t, 2)
	db := openAgoraDB(t, e)
	var coldID string
	must(t, db.SQL().QueryRow(`SELECT id FROM dispatches ORDER BY created_at, id LIMIT 1`).Scan(&coldID))
	var used []int
	for i := range 2 {
		ready := standbys(t, e)
		tasks := slotTasks(t, e)
		ids := e.runPlan("warm"+strconv.Itoa(i), "worker")
		pid := supervisorPID(t, db, ids[0])
		var task string
		must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, ids[0]).Scan(&task))
		if !tasks[task] {
			t.Fatalf("dispatch %s ran as task %q, not in one of the ready slots %v", ids[0], task, tasks)
		}
		if !contains(ready, pid) {
			t.Fatalf("dispatch %s was supervised by %d, not by one of the ready standbys %v", ids[0], pid, ready)
		}
		if contains(used, pid) {
			t.Fatalf("standby %d supervised two dispatches", pid)
		}
		used = append(used, pid)
		if cold, warm := auditKinds(t, db, coldID), auditKinds(t, db, ids[0]); strings.Join(cold, " ") != strings.Join(warm, " ") {
			t.Errorf("audit of the warm dispatch:\n%v\nof the cold one:\n%v", warm, cold)
		}
		var coldIso, warmIso, coldState, warmState string
		must(t, db.SQL().QueryRow(`SELECT isolation, state FROM dispatches WHERE id = ?`, coldID).Scan(&coldIso, &coldState))
		must(t, db.SQL().QueryRow(`SELECT isolation, state FROM dispatches WHERE id = ?`, ids[0]).Scan(&warmIso, &warmState))
		if coldIso != warmIso || coldState != warmState {
			t.Errorf("warm dispatch %s/%q, cold %s/%q", warmState, warmIso, coldState, coldIso)
		}
		waitStandbys(t, e, 2)
	}
	// doctor reads serve's status: both ready, the two claims counted.
	var out []byte
	agoratest.WaitFor(t, 30*time.Second, "doctor to report the held slots", func() bool {
		cmd := exec.Command(agoraBin, "doctor")
		cmd.Env = e.vars
		out, _ = cmd.CombinedOutput()
		return strings.Contains(string(out), "local: warm 2/2 ready (claimed 2, cold ")
	})
	if !strings.Contains(string(out), "held by pid "+strconv.Itoa(serve().Pid)) {
		t.Errorf("doctor does not name serve's pid:\n%s", out)
	}
}

// TestServe_Kill9WithStandbysReady: serve is killed with -9 while two standbys wait. They
// read EOF, kill their slots and exit: none is ever claimed. A restarted serve sweeps what
// is left and its dispatches run in standbys of its own.
func TestServe_Kill9WithStandbysReady(t *testing.T) {
	e, serve := warmServedEnv(t, 2)
	old := standbys(t, e)
	oldSlots := readySlots(t, e)
	must(t, serve().Signal(syscall.SIGKILL))
	agoratest.WaitFor(t, 30*time.Second, "the standbys of the killed serve to exit", func() bool {
		for _, pid := range old {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
	for _, d := range oldSlots {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("slot %s of the killed serve is still there (%v)", d, err)
		}
	}
	cmd := e.serve()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	waitStandbys(t, e, 2)
	db := openAgoraDB(t, e)
	ids := e.runPlan("after", "worker")
	if pid := supervisorPID(t, db, ids[0]); contains(old, pid) {
		t.Fatalf("a standby of the killed serve (%d) supervised %s", pid, ids[0])
	}
}

// TestServe_Kill9ClaimedStandby: the standby running a dispatch is killed with -9. Its slot's
// sandbox dies with it, the dispatch ends failed/lost and its retry runs elsewhere; the slot is
// gone and never claimed again.
func TestServe_Kill9ClaimedStandby(t *testing.T) {
	e, _ := warmServedEnv(t, 1)
	db := openAgoraDB(t, e)
	ready := standbys(t, e)
	slots := readySlots(t, e)
	planPath := filepath.Join(t.TempDir(), "slow.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: slow\ntasks:\n  - id: slow\n    subagent: sleeper\n    retry: {max_attempts: 2, initial_backoff: 10ms}\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	var first string
	agoratest.WaitFor(t, 30*time.Second, "the slow task to start", func() bool {
		return db.SQL().QueryRow(`SELECT id FROM dispatches WHERE state = 'started' AND subagent LIKE 'sleeper%'`).Scan(&first) == nil
	})
	pid := supervisorPID(t, db, first)
	if !contains(ready, pid) {
		t.Fatalf("the slow dispatch runs under %d, not the ready standby %v", pid, ready)
	}
	kids := children(pid)
	if len(kids) == 0 {
		t.Fatalf("standby %d has no sandbox child", pid)
	}
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	agoratest.WaitFor(t, 30*time.Second, "the slot's sandbox to die with its standby", func() bool {
		for _, k := range kids {
			if err := syscall.Kill(k, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
	run := waitRun(t, e.client(), runID, 2*time.Minute)
	if run.State != lifecycle.RunSucceeded || run.Tasks[0].Attempts != 2 {
		t.Fatalf("run %s, task %+v; want succeeded on its second attempt", run.State, run.Tasks[0])
	}
	var state, reason string
	must(t, db.SQL().QueryRow(`SELECT state, reason FROM dispatches WHERE id = ?`, first).Scan(&state, &reason))
	if state != "failed" || reason != "lost" {
		t.Errorf("the killed standby's dispatch ended %s/%s, want failed/lost", state, reason)
	}
	var second string
	must(t, db.SQL().QueryRow(`SELECT id FROM dispatches WHERE subagent LIKE 'sleeper%' AND id != ?`, first).Scan(&second))
	if p := supervisorPID(t, db, second); p == pid {
		t.Fatalf("the retry ran under the killed standby %d", p)
	}
	agoratest.WaitFor(t, 30*time.Second, "the killed standby's slot directory to be swept", func() bool {
		for _, d := range slots {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range ents {
		st, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(d.Name()); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// TestStandby_RefusesAHolderOfAnotherUID: a standby supervisor whose fd 3 is a connection
// from a process of another uid (not the serve that started it) refuses it before it opens
// anything: no slot is started, nothing is read.
func TestStandby_RefusesAHolderOfAnotherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to run a client as another uid")
	}
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("SKIP: no /usr/bin/python3 to connect as another uid")
	}
	e := newEnv(t)
	dir, err := os.MkdirTemp("", "standby-uid-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	defer ln.Close()
	must(t, os.Chmod(sock, 0o777))
	client := exec.Command(py, "-c", "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b'claim X\\n')\ntime.sleep(10)", sock)
	client.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	must(t, client.Start())
	defer func() { client.Process.Kill(); client.Wait() }()
	c, err := ln.Accept()
	must(t, err)
	defer c.Close()
	f, err := c.(*net.UnixConn).File()
	must(t, err)
	defer f.Close()
	cmd := exec.Command(agoraBin, "dispatch", "supervise", "--standby", "local")
	cmd.Env = e.vars
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the holder runs as uid 65534") {
		t.Fatalf("standby with a holder of uid 65534: %v\n%s\nwant a refusal naming the uid", err, out)
	}
	if dirs, _ := filepath.Glob(filepath.Join(e.home, "dispatches", ".warm", "*", "slot-*")); len(dirs) != 0 {
		t.Errorf("slots started for a foreign holder: %v", dirs)
	}
}

// TestStandby_NoNamedSocket: a ready standby listens nowhere: the only way to reach it is
// the socket its holder passed it, which no process of its sandbox inherits.
func TestStandby_NoNamedSocket(t *testing.T) {
	e, _ := warmServedEnv(t, 1)
	b, err := os.ReadFile("/proc/net/unix")
	must(t, err)
	named := map[string]bool{} // socket inodes with a path
	for _, l := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(l); len(f) >= 8 {
			named[f[6]] = true
		}
	}
	for _, pid := range standbys(t, e) {
		for _, p := range append([]int{pid}, children(pid)...) {
			fds, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/fd")
			for _, fd := range fds {
				link, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/fd/" + fd.Name())
				ino, ok := strings.CutPrefix(link, "socket:[")
				if !ok {
					continue
				}
				if p != pid {
					t.Errorf("the standby's sandbox process %d holds socket %s (fd %s)", p, link, fd.Name())
				} else if named[strings.TrimSuffix(ino, "]")] {
					t.Errorf("standby %d holds a named socket %s (fd %s)", pid, link, fd.Name())
				}
			}
		}
	}
}

// TestServe_StaleStandbyRefusesItsClaim: agora.yaml changes while standbys wait (a target's
// limits, say). A standby started before would run the dispatch under the old file: it
// refuses the claim, the dispatch runs under a supervisor started after the change, and the
// stale standbys are replaced.
func TestServe_StaleStandbyRefusesItsClaim(t *testing.T) {
	e, _ := warmServedEnv(t, 2)
	old := standbys(t, e)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("# edited while standbys wait\n")
	must(t, err)
	must(t, f.Close())
	db := openAgoraDB(t, e)
	ids := e.runPlan("stale", "worker")
	if pid := supervisorPID(t, db, ids[0]); contains(old, pid) {
		t.Fatalf("dispatch %s ran in standby %d, started before agora.yaml changed", ids[0], pid)
	}
	agoratest.WaitFor(t, 30*time.Second, "the stale standbys to go", func() bool {
		for _, pid := range old {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
}

// TestServe_Kill9ReadyStandby: a ready, unclaimed standby is killed with -9 (its slot's
// sandbox dies with it). serve counts it gone and starts another; the next dispatch runs in a
// live standby, never in the dead one, and the dead one's slot directory is swept.
func TestServe_Kill9ReadyStandby(t *testing.T) {
	e, _ := warmServedEnv(t, 1)
	old := standbys(t, e)
	oldSlots := readySlots(t, e)
	if len(old) != 1 || len(oldSlots) != 1 {
		t.Fatalf("standbys %v, slots %v: want one each", old, oldSlots)
	}
	kids := children(old[0])
	must(t, syscall.Kill(old[0], syscall.SIGKILL))
	agoratest.WaitFor(t, 30*time.Second, "the killed standby's sandbox to die", func() bool {
		for _, k := range append(kids, old[0]) {
			if err := syscall.Kill(k, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
	db := openAgoraDB(t, e)
	ids := e.runPlan("after-kill", "worker")
	if pid := supervisorPID(t, db, ids[0]); pid == old[0] {
		t.Fatalf("dispatch %s ran under the killed standby %d", ids[0], pid)
	}
	agoratest.WaitFor(t, 30*time.Second, "a new standby and the dead slot swept", func() bool {
		if _, err := os.Stat(oldSlots[0]); err == nil {
			return false
		}
		s := standbys(t, e)
		return len(s) == 1 && s[0] != old[0]
	})
}
