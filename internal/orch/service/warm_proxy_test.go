package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServe_ProxyDispatchRunsInStandby: the subagents' capability grants a host, so every
// dispatch has the egress proxy and binds its stage's trust file over the system trust store.
// serve's standby starts its slot from the template file a cold dispatch wrote (whose trust
// file is that dispatch's, gone since), and the next proxy dispatch runs in that standby's
// slot, the trust store filled at the claim (before, every proxy dispatch missed its
// standby's slot and started cold).
func TestServe_ProxyDispatchRunsInStandby(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	requireBwrap(t)
	e := newEnvShell(t, "targets:\n  local:\n    warm: 1\n", "description: a shell with one host\ncommands: [\"sh -c *\"]\negress: [api.test]\n")
	serve := e.serve()
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
	})
	cold := e.runPlan("cold", "worker")
	waitStandbys(t, e, 1)
	db := openAgoraDB(t, e)
	var network string
	must(t, db.SQL().QueryRow(`SELECT network FROM dispatches WHERE id = ?`, cold[0]).Scan(&network))
	if network != "proxy" {
		t.Fatalf("the cold dispatch's network is %q, want proxy", network)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "dispatches", ".warm", "local", "template.json")); err != nil {
		t.Fatalf("template: %v", err)
	} else if !strings.Contains(string(b), "/etc/ssl/certs/ca-certificates.crt") {
		t.Fatalf("the template lacks the trust store's bind: %s", b)
	}
	ready, tasks := idleStandbys(t, e), slotTasks(t, e)
	ids := e.runPlan("warm", "worker")
	var task string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id, network FROM dispatches WHERE id = ?`, ids[0]).Scan(&task, &network))
	if !tasks[task] || network != "proxy" {
		t.Fatalf("proxy dispatch %s ran as task %q (network %s), not in the ready slot %v", ids[0], task, network, tasks)
	}
	if pid := supervisorPID(t, db, ids[0]); !contains(ready, pid) {
		t.Fatalf("dispatch %s was supervised by %d, not by the ready standby %v", ids[0], pid, ready)
	}
}
