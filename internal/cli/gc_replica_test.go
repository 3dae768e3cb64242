package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
)

// TestGC_PrunesReplicaGenerations: a home whose agora.db was replicated by three serve
// starts (three generations on versitygw) with replicate.keep_generations 1: `agora gc
// --dry-run` lists the two older generations and deletes nothing; `agora gc` records one
// retention.replica_pruned entry each and deletes them, keeping the newest.
func TestGC_PrunesReplicaGenerations(t *testing.T) {
	srv := s3test.Shared(t)
	b := srv.Bucket(t, false)
	c := srv.Client(t, b)
	env := auditHome(t, "")
	dir := env["AGORA_HOME"]
	creds := filepath.Join(t.TempDir(), "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	writeFiles(t, map[string]string{filepath.Join(dir, "agora.yaml"): fmt.Sprintf(
		"egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  keep_generations: 1\n",
		b.Endpoint, b.Bucket, b.Prefix, creds)})
	pub, _ := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	secret, _ := os.ReadFile(filepath.Join(dir, home.SecretKeyFile))
	var gens []string
	for range 3 {
		r, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: filepath.Join(dir, "agora.db"),
			Identity: strings.TrimSpace(string(pub)), Key: replicate.SegmentKey(secret), Lag: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		gens = append(gens, r.Status().Generation)
	}
	count := func(g string) int {
		names, err := c.List(t.Context(), "replica/agora/"+g+"/")
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	r := runAgora(t, env, "gc", "--dry-run", "-o", "json")
	var rep struct {
		Replicas []replicate.PrunedGeneration `json:"replica_generations"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("gc --dry-run: %+v", r)
	}
	if len(rep.Replicas) != 2 || rep.Replicas[0].Generation != gens[0] || rep.Replicas[1].Generation != gens[1] {
		t.Fatalf("dry run lists %+v, want generations %s and %s", rep.Replicas, gens[0], gens[1])
	}
	if count(gens[0]) == 0 || count(gens[1]) == 0 {
		t.Fatal("the dry run deleted a generation")
	}
	if r := runAgora(t, env, "gc"); r.code != 0 || !strings.Contains(r.stderr, "purged replica generation agora/"+gens[0]) {
		t.Fatalf("gc: %+v", r)
	}
	if count(gens[0]) != 0 || count(gens[1]) != 0 || count(gens[2]) == 0 {
		t.Errorf("after gc: segments %d, %d, %d; want the two older generations gone, the newest kept", count(gens[0]), count(gens[1]), count(gens[2]))
	}
	r = runAgora(t, env, "audit", "log", "--kind", "retention.replica_pruned", "-o", "json")
	var entries []struct {
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 2 || entries[0].Subject != "replica/agora/"+gens[0] ||
		entries[0].Details["role"] != "operator" {
		t.Errorf("retention.replica_pruned entries: %v\n%s", err, r.stdout)
	}
}
