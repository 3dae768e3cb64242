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
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// replicateOnce ships env's agora.db to c as a serve's replicator would (a generation of its
// own) and returns the generation. The serve wiring has its own test; this one is about restore.
func replicateOnce(t *testing.T, env map[string]string, c *s3.Client) string {
	t.Helper()
	pub, err := os.ReadFile(filepath.Join(env["AGORA_HOME"], "keys", "audit.pub"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(env["AGORA_HOME"], "keys", "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: filepath.Join(env["AGORA_HOME"], "agora.db"),
		Identity: strings.TrimSpace(string(pub)), Key: replicate.SegmentKey(secret), Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.Status().Generation
}

func register(t *testing.T, env map[string]string, names ...string) {
	t.Helper()
	for _, name := range names {
		src := filepath.Join(t.TempDir(), name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "README.md"), []byte("# "+name+"\n"), 0o644)
		if r := runAgora(t, env, "capability", "register", name, "--from", src); r.code != 0 {
			t.Fatalf("register %s: %+v", name, r)
		}
	}
}

// TestRestore_LostHome: a home replicated to one bucket and anchored in another loses its disk;
// `agora restore` brings it back from the operator's agora.yaml and keys, its audit log holds the
// newest anchored checkpoint, and an export of it verifies against the anchor bucket. Attacks:
// the bucket serving an older generation (the newest deleted: a rollback) fails the restore and
// leaves no database; a non-empty --to and missing keys are refused; no credential is printed.
func TestRestore_LostHome(t *testing.T) {
	srv := s3test.Shared(t)
	locked, repl := srv.Bucket(t, true), srv.Bucket(t, false)
	backup := t.TempDir()
	creds := filepath.Join(backup, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}\n"+
		"replicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  lag: 200ms\n",
		locked.Endpoint, locked.Bucket, locked.Prefix, creds, repl.Endpoint, repl.Bucket, repl.Prefix, creds)
	a := auditHome(t, yaml)
	c := srv.Client(t, repl)
	old := replicateOnce(t, a, c) // 3 entries
	register(t, a, "late-tools", "later-tools")
	if r := runAgora(t, a, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 5") {
		t.Fatalf("checkpoint: %+v", r)
	}
	replicateOnce(t, a, c) // 5 entries and the checkpoint's records
	// The operator's copies, kept apart from the home; then the disk is lost.
	keys, cfgCopy := keepBackup(t, a["AGORA_HOME"], backup, yaml)
	if err := os.RemoveAll(a["AGORA_HOME"]); err != nil {
		t.Fatal(err)
	}
	sa, _ := standalone(t)

	to := filepath.Join(t.TempDir(), "home")
	r := runAgora(t, sa, "restore", "--to", to, "--config", cfgCopy, "--keys", keys, "-o", "json")
	if r.code != cmdutil.ExitOK {
		t.Fatalf("restore: %+v", r)
	}
	var res struct {
		Databases []struct{ DB string } `json:"databases"`
		Anchors   []struct {
			Size    uint64 `json:"size"`
			LogSize uint64 `json:"log_size"`
		} `json:"anchors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(res.Databases) != 1 || res.Databases[0].DB != "agora" || len(res.Anchors) != 1 || res.Anchors[0].Size != 5 || res.Anchors[0].LogSize < 5 {
		t.Fatalf("restore result: %s", r.stdout)
	}
	for _, s := range []string{srv.Creds.SecretAccessKey, srv.Creds.AccessKeyID} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("restore printed a credential")
		}
	}
	// The restored home is a home: its log exports and verifies against the anchor bucket.
	b := map[string]string{"AGORA_HOME": to, "HOME": filepath.Dir(to), "USER": "tester"}
	if r := runAgora(t, b, "capability", "list"); r.code != 0 || !strings.Contains(r.stdout, "later-tools") {
		t.Fatalf("the restored catalog: %+v", r)
	}
	bundle := filepath.Join(t.TempDir(), "audit.json")
	if r := runAgora(t, b, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	r = runAgora(t, sa, "verify", bundle, "--key", filepath.Join(keys, "audit.pub"),
		"--anchor-bucket", "s3://"+locked.Bucket+"/"+locked.Prefix, "--anchor-endpoint", locked.Endpoint, "--anchor-credentials-file", creds)
	if r.code != cmdutil.ExitOK {
		t.Fatalf("the restored log does not verify against the anchors:\n%s%s", r.stdout, r.stderr)
	}

	// Refusals before anything is written.
	if r := runAgora(t, sa, "restore", "--to", to, "--config", cfgCopy, "--keys", keys); r.code == 0 || !strings.Contains(r.stderr, "not empty") {
		t.Errorf("restore into a non-empty directory: %+v", r)
	}
	if r := runAgora(t, sa, "restore", "--to", filepath.Join(t.TempDir(), "h"), "--config", cfgCopy, "--keys", t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "secret.key") {
		t.Errorf("restore without keys: %+v", r)
	}

	// Attack: the bucket serves the older generation only (the newest deleted, or hidden by a
	// stale mirror). The replica itself is whole, so only the anchor can tell: the restored
	// log of 3 entries is shorter than the anchored checkpoint 5.
	names, err := c.List(t.Context(), "replica/agora/")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(n, old) {
			if err := c.Delete(t.Context(), n, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	rolled := filepath.Join(t.TempDir(), "home")
	r = runAgora(t, sa, "restore", "--to", rolled, "--config", cfgCopy, "--keys", keys)
	if r.code == 0 || !strings.Contains(r.stderr, "truncated or rolled back") || !strings.Contains(r.stderr, "does not verify against its anchors") {
		t.Fatalf("a rolled-back replica restored: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(rolled, "agora.db")); err == nil {
		t.Error("the rolled-back database was left in the new home")
	}
}

// keepBackup copies what an operator keeps apart from a home (keys/ and agora.yaml) into
// backup and returns their paths.
func keepBackup(t *testing.T, home, backup, yaml string) (keys, cfg string) {
	t.Helper()
	keys = filepath.Join(backup, "keys")
	if err := os.CopyFS(keys, os.DirFS(filepath.Join(home, "keys"))); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(backup, "agora.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return keys, cfg
}
