package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestServe_EndWaitsForAgoraReplica: in a home that replicates, a task's end reaches the
// engine (orch.db) only once agora.db's replica holds the dispatch's end, so a takeover never
// restores a task's end without its dispatch's. Here the bucket is unreachable (nothing
// listens at its endpoint): serve holds agora.db's replication lock and never publishes a
// replicated status, so each end waits out the replica wait, is then reported anyway (a run
// goes on through a bucket outage), and serve says so for that dispatch. Without the wait
// the warning never comes.
func TestServe_EndWaitsForAgoraReplica(t *testing.T) {
	requireBwrap(t)
	dead := agoratest.FreeAddr(t) // listened on and closed: nothing answers there
	creds := filepath.Join(t.TempDir(), "s3.env")
	must(t, os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID=x\nAWS_SECRET_ACCESS_KEY=y\n"), 0o600))
	e := newEnvConfig(t, fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: \"http://%s\", bucket: outage, prefix: home, credentials_file: %s}\n  lag: 100ms\n", dead, creds))
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	ids := e.runPlan("outage", "worker")
	if len(ids) != 1 || ids[0] == "" {
		t.Fatalf("dispatches %v", ids)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
	want := "a task's end reaches orch.db before its dispatch's end is in agora.db's replica"
	if !strings.Contains(string(log), want) || !strings.Contains(string(log), ids[0]) {
		t.Errorf("serve did not hold the end for agora.db's replica (no warning for dispatch %s):\n%s", ids[0], log)
	}
}
