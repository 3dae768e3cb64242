package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

// TestDoctor_S3Buckets: agora doctor asks each configured bucket whether it exists and
// takes agora's credentials, and says which fails and why, without the secret.
func TestDoctor_S3Buckets(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, true)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3.env")
	os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600)
	wrong := filepath.Join(dir, "wrong.env")
	os.WriteFile(wrong, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY=not-the-secret\n"), 0o600)
	env := auditHome(t, fmt.Sprintf(`egress: {allow_private: [127.0.0.1/32]}
blobs:
  s3: {endpoint: %[1]q, bucket: %[2]s, credentials_file: %[3]s}
audit:
  anchors:
    - s3: {endpoint: %[1]q, bucket: no-such-bucket, retention: 1d, credentials_file: %[3]s}
    - s3: {endpoint: %[1]q, bucket: %[2]s, retention: 1d, credentials_file: %[4]s}
`, cfg.Endpoint, cfg.Bucket, creds, wrong))
	r := runAgora(t, env, "doctor")
	rows := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if name, rest, ok := strings.Cut(line, "\t"); ok {
			rows[name] = rest
		}
	}
	if !strings.HasPrefix(rows["blobs bucket"], "ok\t") {
		t.Errorf("blobs bucket: %q", rows["blobs bucket"])
	}
	if got := rows["anchor bucket 0"]; strings.HasPrefix(got, "ok") || !strings.Contains(got, "does not exist") {
		t.Errorf("missing anchor bucket: %q", got)
	}
	if got := rows["anchor bucket 1"]; strings.HasPrefix(got, "ok") || !strings.Contains(got, "refused agora's credentials") {
		t.Errorf("anchor bucket with the wrong secret: %q", got)
	}
	if strings.Contains(r.stdout+r.stderr, "not-the-secret") || strings.Contains(r.stdout+r.stderr, srv.Creds.SecretAccessKey) {
		t.Error("doctor's output carries a secret")
	}
}
