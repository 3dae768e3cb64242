package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/s3"
	"github.com/agora-dev/agora/internal/store"
)

// oldDispatch records in home's agora.db a dispatch that ended 100 days ago whose patch is p.
func oldDispatch(t *testing.T, home, id string, p digest.Digest) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(home, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ended := time.Now().Add(-100 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	if _, err := db.SQL().Exec(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network,
		input_digest, timeout_ms, actor, created_at, ended_at, result) VALUES (?, 'finished', 'fixer',
		'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none', ?, 1000,
		'tester', ?, ?, ?)`, id, string(p), ended, ended, `{"outputs":[],"patch":{"digest":"`+string(p)+`","size":12}}`); err != nil {
		t.Fatal(err)
	}
}

// TestLeaderLease_StandbyGCRefused with the real binary, a real control plane and
// versitygw: replicas a and b share blobs.s3 with retention set; a leads, b waits as a
// standby, and each home names an aged-out blob in the bucket. The attack: `agora gc` on the
// standby's home. It must fail naming the rule, delete nothing from the bucket and commit
// nothing to b's home; its --dry-run still plans. The leading serve's own sweep purges a's
// blob (the one place that deletes). The control: b's home without leader: purges.
func TestLeaderLease_StandbyGCRefused(t *testing.T) {
	srv := s3test.Shared(t)
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t) // the package's one control plane; its leases are named apart
	dir := t.TempDir()
	w := &leaseWorld{t: t, bin: builtAgora(t), dir: dir, cluster: c, lease: fmt.Sprintf("agora-gc-%d", os.Getpid())}
	bucket := srv.Bucket(t, false)
	creds := filepath.Join(dir, "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	shared := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nretention: {blobs: 90d, logs: 30d}\nblobs:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n",
		bucket.Endpoint, bucket.Bucket, bucket.Prefix, creds)
	blobs := blob.OpenRemote(s3.Blobs{C: srv.Client(t, bucket)})
	// Each blob is dated 100 days back (versitygw's Last-Modified is its file's time): a sweep
	// never deletes a blob stored in its last minute.
	put := func(s string) digest.Digest {
		d, err := blobs.Put([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-100 * 24 * time.Hour)
		if err := os.Chtimes(filepath.Join(srv.Dir, bucket.Bucket, bucket.Prefix, "blobs", "sha256", d.Hex()[:2], d.Hex()), then, then); err != nil {
			t.Fatal(err)
		}
		return d
	}
	envA, envB := w.home("a", shared), w.home("b", shared)
	pa, pb := put("a's old patch"), put("b's old patch")
	oldDispatch(t, envA["AGORA_HOME"], "d-a", pa)
	oldDispatch(t, envB["AGORA_HOME"], "d-b", pb)

	a := w.serve(envA)
	w.waitLog(a, "orchestrator serving on")
	b := w.serve(envB)
	w.waitLog(b, "standby: waiting for the leader lease")

	before := fingerprint(t, envB["AGORA_HOME"])
	out, err := w.cmd(envB, "gc").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "only the orch serve holding the Lease purges") {
		t.Fatalf("agora gc on the standby's home: %v, want the leader refusal:\n%s", err, out)
	}
	if !blobs.Has(pb) {
		t.Error("the standby's gc deleted its aged-out blob from the shared bucket")
	}
	if after := fingerprint(t, envB["AGORA_HOME"]); !mapsEqual(before, after) {
		t.Error("the standby's refused gc committed to its home")
	}
	if plan := w.must(envB, "gc", "--dry-run"); !strings.Contains(plan, "d-b") {
		t.Errorf("gc --dry-run on the standby does not plan d-b:\n%s", plan)
	}

	// The leader's sweep runs at its start: a's blob goes, recorded in a's log.
	agoratest.Eventually(t, time.Minute, "the leading serve's sweep to purge a's aged-out blob", func() error {
		if blobs.Has(pa) {
			return fmt.Errorf("still stored\n%s", a.log())
		}
		return nil
	})
	if log := w.must(envA, "audit", "log", "--kind", "retention.purged"); !strings.Contains(log, "d-a") {
		t.Errorf("a's log has no retention.purged of d-a:\n%s", log)
	}

	// The control: the same standby home, its serve stopped and leader: removed, purges.
	b.cmd.Process.Kill()
	<-b.done
	b.done <- nil
	writeFiles(t, map[string]string{filepath.Join(envB["AGORA_HOME"], "agora.yaml"): shared})
	w.must(envB, "gc")
	if blobs.Has(pb) {
		t.Error("the control (no leader:) did not purge b's blob: the test proves nothing")
	}
}
