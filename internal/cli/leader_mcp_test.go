package cli_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

// TestLeaderLease_MCPDoesNotReplicate: with leader: in agora.yaml, `agora mcp` never
// replicates agora.db (its home may be a standby's or a fenced old leader's, and its replica
// would become the generation the next takeover restores). The control, the same home
// without leader:, does replicate to its own bucket within the same time.
func TestLeaderLease_MCPDoesNotReplicate(t *testing.T) {
	srv := s3test.Shared(t)
	dir := t.TempDir()
	w := &leaseWorld{t: t, bin: builtAgora(t), dir: dir}
	creds := filepath.Join(dir, "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	type home struct {
		env    map[string]string
		bucket func() []string
	}
	mk := func(name, extra string) home {
		b := srv.Bucket(t, false)
		env := map[string]string{"AGORA_HOME": filepath.Join(dir, name), "HOME": dir, "USER": "tester"}
		w.must(env, "init")
		writeFiles(t, map[string]string{filepath.Join(env["AGORA_HOME"], "agora.yaml"): fmt.Sprintf(
			"egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  lag: 200ms\n",
			b.Endpoint, b.Bucket, b.Prefix, creds) + extra})
		return home{env, func() []string {
			names, err := srv.Client(t, b).List(t.Context(), "replica/")
			if err != nil {
				t.Fatal(err)
			}
			return names
		}}
	}
	led := mk("led", "leader: {lease: agora-leader, namespace: agora, kubeconfig: /nonexistent, identity: x}\n")
	control := mk("control", "")
	for _, h := range []home{led, control} {
		c := w.cmd(h.env, "mcp")
		stdin, err := c.StdinPipe() // open: the server waits for requests
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); c.Process.Kill(); c.Wait() })
	}
	agoratest.Eventually(t, time.Minute, "the control mcp server to replicate (else the test proves nothing)", func() error {
		if len(control.bucket()) == 0 {
			return errors.New("its bucket is empty")
		}
		return nil
	})
	// Five more lags for the led home's server. It would replicate from a goroutine of its
	// own, as the control did, and nothing it says marks having declined to: an upload's
	// absence can only be given time.
	time.Sleep(time.Second)
	if names := led.bucket(); len(names) != 0 {
		t.Errorf("agora mcp with leader: replicated %v", names)
	}
}
