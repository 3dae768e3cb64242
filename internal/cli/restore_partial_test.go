package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

// TestRestore_SecondDatabaseFails: agora.db restores but orch.db's replica is damaged (here an
// object under replica/orch/ that is no segment): the restore fails and leaves no database in
// the new home, as a restore that fails its anchors does, so no serve starts on agora.db
// without the orchestrator's state.
func TestRestore_SecondDatabaseFails(t *testing.T) {
	srv := s3test.Shared(t)
	repl := srv.Bucket(t, false)
	backup := t.TempDir()
	creds := filepath.Join(backup, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n",
		repl.Endpoint, repl.Bucket, repl.Prefix, creds)
	a := auditHome(t, yaml)
	c := srv.Client(t, repl)
	replicateOnce(t, a, c)
	if _, err := c.Put(t.Context(), "replica/orch/not-a-segment", []byte("x"), false, nil); err != nil {
		t.Fatal(err)
	}
	keys, cfgCopy := keepBackup(t, a["AGORA_HOME"], backup, yaml)
	sa, _ := standalone(t)
	to := filepath.Join(t.TempDir(), "home")
	r := runAgora(t, sa, "restore", "--to", to, "--config", cfgCopy, "--keys", keys)
	if r.code == 0 || !strings.Contains(r.stderr, "not a replica segment name") || !strings.Contains(r.stderr, "agora.db, restored before it, was removed") {
		t.Fatalf("restore with a damaged orch replica: %+v", r)
	}
	for _, db := range []string{"agora.db", filepath.Join("orch", "orch.db")} {
		if _, err := os.Stat(filepath.Join(to, db)); err == nil {
			t.Errorf("a failed restore left %s in the new home", db)
		}
	}
}
