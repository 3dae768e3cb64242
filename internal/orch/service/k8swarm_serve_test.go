package service_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/store"
)

// k8sWarmEnv is an env whose target "pods" on the kwok control plane keeps `warm: 2`, in a
// namespace of its own and without the gate node selector (newK8sEnv's): its pods run at once
// and its slot Jobs never meet another test's listing.
func k8sWarmEnv(t *testing.T) (*env, *k8stest.Cluster) {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t)
	e := newEnv(t)
	pin := "@sha256:" + strings.Repeat("cd", 32)
	cfg := fmt.Sprintf(`targets:
  pods:
    provider: kubernetes
    kubeconfig: %s
    namespace: %s
    image: registry.example/agents/toolchain%s
    worker_image: registry.example/agora/worker%s
    gateway: https://10.250.0.1:8443
    warm: 2
`, c.Kubeconfig, c.Namespace, pin, pin)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString(cfg)
	must(t, err)
	must(t, f.Close())
	return e, c
}

// slotJobs lists the namespace's slot Jobs (agora.slot label) by slot id; claimed ones carry
// the claimed annotation's dispatch as value, waiting ones "".
func slotJobs(t *testing.T, c *k8stest.Cluster) map[string]string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata struct {
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	must(t, c.Do(t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs?labelSelector=agora.slot", nil, &l))
	out := map[string]string{}
	for _, j := range l.Items {
		out[j.Metadata.Labels["agora.slot"]] = j.Metadata.Annotations["agora.dev/claimed"]
	}
	return out
}

// slotHolder is the pid whose open files include slot id's gateway hold
// (AGORA_HOME/gateway/slots/ID/hold): the process that holds the slot; 0 when none does.
func slotHolder(e *env, id string) int {
	want := filepath.Join(e.home, "gateway", "slots", id, "hold")
	for _, pid := range standbys(e.t, e) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == want {
				return pid
			}
		}
	}
	return 0
}

// heldSlots waits until n slot Jobs wait, each held by a distinct standby supervisor, and
// returns them as slot id -> holder pid.
func heldSlots(t *testing.T, e *env, c *k8stest.Cluster, n int) map[string]int {
	t.Helper()
	var held map[string]int
	agoratest.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d kubernetes slot Jobs held by standby supervisors", n), func() bool {
		held = map[string]int{}
		pids := map[int]bool{}
		for id, claimed := range slotJobs(t, c) {
			if claimed != "" {
				continue
			}
			if pid := slotHolder(e, id); pid != 0 && !pids[pid] {
				held[id], pids[pid] = pid, true
			}
		}
		return len(held) >= n
	})
	return held
}

// runPodsPlan runs a one-task plan of the worker subagent on target pods and returns its
// dispatch id once the run ended.
func (e *env) runPodsPlan(name string) string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), name+".yaml")
	must(e.t, os.WriteFile(p, []byte("version: 1\nname: "+name+"\ndefaults: {target: pods}\ntasks:\n  - id: t0\n    subagent: worker\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
	run := waitRun(e.t, e.client(), runID, 2*time.Minute)
	return run.Tasks[0].DispatchID
}

// TestServe_KubernetesWarmSlotsHeldByServe: `agora orch serve` holds a
// kubernetes target's `warm: 2` as two standby supervisors, each the holder of one slot Job's
// gateway slot (its hold lock is the standby's open file), and doctor names serve as their
// holder. Attacks: a standby killed with -9 leaves a slot whose token the gateway refuses; the
// next standby's start deletes its Job, which nobody claimed. A slot changed while held (its
// NetworkPolicy deleted) is never claimed: the dispatch handed to its standby runs cold and
// the changed slot's Job is deleted. serve killed with -9 together with its standbys leaves
// Jobs no one holds: a restarted serve's sweep deletes every one of them (none claimed) and
// its own standbys hold new slots, never the old ones.
func TestServe_KubernetesWarmSlotsHeldByServe(t *testing.T) {
	e, c := k8sWarmEnv(t)
	serve := e.serve()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			t.Logf("serve log:\n%s", b)
		}
		serve.Process.Kill()
		serve.Wait()
		for _, pid := range standbys(t, e) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// A cold dispatch teaches the target its shape (its supervisor saves the template); a
	// serve started after it starts the standbys at once.
	start := time.Now()
	e.runPodsPlan("cold")
	t.Logf("%s: cold dispatch done", time.Since(start))
	must(t, serve.Process.Signal(syscall.SIGTERM))
	serve.Wait()
	serve = e.serve()
	held := heldSlots(t, e, c, 2)
	t.Logf("%s: slots held: %v", time.Since(start), held)

	// A standby says ready once its slot's pod runs: doctor counts it then.
	var out string
	agoratest.WaitFor(t, time.Minute, "doctor to count 2 ready kubernetes slots", func() bool {
		out = e.run("doctor")
		return strings.Contains(out, "pods: warm 2/2 ready")
	})
	t.Logf("%s: doctor counts them", time.Since(start))
	if !strings.Contains(out, fmt.Sprintf("held by pid %d", serve.Process.Pid)) {
		t.Errorf("doctor does not say serve (%d) holds the kubernetes slots:\n%s", serve.Process.Pid, out)
	}

	// A second serve of the home (`agora mcp`, the MCP server) holds two slots of its own: its
	// sweep leaves the first serve's held slots standing, held by the same standbys, and no
	// standby holds two. Killed with -9, its standbys delete their Jobs; the first serve's
	// stand. (k8shold's e122b81; removed then as flaky: the kwok churn above was the cause.)
	mcp := exec.Command(agoraBin, "mcp")
	mcp.Env = e.vars
	in, err := mcp.StdinPipe()
	must(t, err)
	mcpLog, err := os.Create(filepath.Join(t.TempDir(), "mcp.log"))
	must(t, err)
	mcp.Stdout, mcp.Stderr = mcpLog, mcpLog
	must(t, mcp.Start())
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(mcpLog.Name())
			t.Logf("mcp serve log:\n%s", b)
		}
	})
	defer in.Close()
	both := heldSlots(t, e, c, 4)
	for id, pid := range held {
		if both[id] != pid {
			t.Fatalf("the first serve's slot %s (standby %d) is held by %d after a second serve started: %v", id, pid, both[id], both)
		}
	}
	must(t, mcp.Process.Kill())
	mcp.Wait()
	agoratest.WaitFor(t, time.Minute, "the killed mcp serve's standbys to delete their slot Jobs", func() bool {
		jobs := slotJobs(t, c)
		for id := range both {
			if _, there := jobs[id]; there && held[id] == 0 {
				return false
			}
		}
		return true
	})
	if now := heldSlots(t, e, c, 2); !maps.Equal(now, held) {
		t.Fatalf("after the mcp serve's kill the first serve's slots are %v, want %v", now, held)
	}
	t.Logf("%s: a second serve held its own, and its kill left the first's", time.Since(start))

	// A held slot's pod deleted while it waits: its standby sees it (the slot's
	// pod watch) and ends, deleting its Job, and serve starts another; before, the standby
	// waited on, counted ready, until a claim's check found the pod gone. The deleted slot is
	// never held again.
	var gonePod string
	for id := range held {
		gonePod = id
		break
	}
	must(t, c.Do(t.Context(), http.MethodDelete, "/api/v1/namespaces/"+c.Namespace+"/pods?labelSelector=agora.slot%3D"+gonePod, nil, nil))
	agoratest.WaitFor(t, time.Minute, "the standby of the slot whose pod was deleted to end", func() bool {
		return syscall.Kill(held[gonePod], 0) != nil || isZombie(held[gonePod])
	})
	agoratest.WaitFor(t, time.Minute, "the slot whose pod was deleted to have its Job deleted", func() bool {
		_, there := slotJobs(t, c)[gonePod]
		return !there
	})
	held = heldSlots(t, e, c, 2)
	if _, ok := held[gonePod]; ok {
		t.Fatalf("the slot whose pod was deleted (%s) is held again: %v", gonePod, held)
	}
	t.Logf("%s: a deleted slot pod's standby ended, refilled", time.Since(start))

	// A standby killed with -9: its gateway hold is free; the pool refills and the new
	// standby's start (serve's sweep) deletes the killed one's Job, never claimed.
	var victim string
	for id := range held {
		victim = id
		break
	}
	must(t, syscall.Kill(held[victim], syscall.SIGKILL))
	agoratest.WaitFor(t, 2*time.Minute, "the killed standby's slot Job to be swept", func() bool {
		_, there := slotJobs(t, c)[victim]
		return !there
	})
	held = heldSlots(t, e, c, 2)
	t.Logf("%s: killed standby's slot swept, refilled", time.Since(start))
	if _, ok := held[victim]; ok {
		t.Fatalf("the killed standby's slot %s is held again: %v", victim, held)
	}

	// Both held slots changed while they wait: their NetworkPolicies deleted (the pods would
	// run unconfined). The dispatch handed to a standby checks its slot and runs cold.
	for id := range held {
		must(t, c.Do(t.Context(), http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/"+c.Namespace+"/networkpolicies/agora-"+id, nil, nil))
	}
	id := e.runPodsPlan("changed")
	t.Logf("%s: dispatch on changed slots done", time.Since(start))
	jobs := slotJobs(t, c)
	for slot, claimed := range jobs {
		if claimed != "" {
			t.Errorf("slot %s was claimed by %s after its NetworkPolicy was deleted", slot, claimed)
		}
	}
	db, err := store.Open(t.Context(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	var task string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, id).Scan(&task))
	pid := supervisorPID(t, db, id)
	db.Close()
	if !slices.Contains(slices.Collect(maps.Values(held)), pid) {
		t.Errorf("dispatch %s was supervised by %d, not handed to a held standby %v", id, pid, held)
	}
	if task == "" || slices.ContainsFunc(slices.Collect(maps.Keys(held)), func(s string) bool { return strings.Contains(task, s) }) {
		t.Errorf("the dispatch handed a changed slot ran as %q, not in a cold Job of its own (slots %v)", task, held)
	}

	// serve and all its standbys killed with -9 at once: nothing deletes their Jobs. The
	// restarted serve's sweep deletes every one (none claimed); its standbys hold new slots.
	// "At once": serve is stopped first (SIGSTOP), so it neither sweeps after its standbys'
	// exits nor lets them read EOF and delete their own slots before they are killed; then
	// the standbys and serve are killed.
	left := heldSlots(t, e, c, 2)
	must(t, serve.Process.Signal(syscall.SIGSTOP))
	for _, pid := range standbys(t, e) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	agoratest.WaitFor(t, 30*time.Second, "the killed standbys to exit", func() bool { return len(standbys(t, e)) == 0 })
	must(t, serve.Process.Kill())
	serve.Wait()
	for slot := range left {
		if _, there := slotJobs(t, c)[slot]; !there {
			t.Fatalf("slot %s's Job went before any sweep: the test kills too late", slot)
		}
	}
	serve = e.serve()
	agoratest.WaitFor(t, 2*time.Minute, "the restarted serve to sweep the killed standbys' slot Jobs", func() bool {
		jobs := slotJobs(t, c)
		for slot := range left {
			if _, there := jobs[slot]; there {
				return false
			}
		}
		return true
	})
	// Nothing of them is left: no NetworkPolicy, no Secret (their Jobs owned them, and the
	// sweep deletes a dead slot's parts by label too: a standby killed while it made its slot
	// left them unowned).
	agoratest.WaitFor(t, time.Minute, "the killed standbys' slot policies and Secrets to go", func() bool {
		for slot := range left {
			for _, kind := range []string{"/apis/networking.k8s.io/v1/namespaces/" + c.Namespace + "/networkpolicies/agora-", "/api/v1/namespaces/" + c.Namespace + "/secrets/agora-"} {
				if c.Do(t.Context(), http.MethodGet, kind+slot, nil, nil) == nil {
					return false
				}
			}
		}
		return true
	})
	t.Logf("%s: restarted serve swept", time.Since(start))
	for slot, claimed := range slotJobs(t, c) {
		if _, old := left[slot]; old || claimed != "" {
			t.Errorf("after the restart slot %s stands (claimed %q)", slot, claimed)
		}
	}
}

// isZombie says whether pid has exited and waits for its parent to reap it.
func isZombie(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}
