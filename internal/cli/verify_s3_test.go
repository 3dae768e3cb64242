package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestVerify_S3Anchor: a home whose checkpoints are anchored in an Object Lock bucket
// (a real versitygw) exports a bundle that `agora verify --anchor-bucket` checks against the
// bucket: the anchored object equals the bundle's checkpoint and is under COMPLIANCE
// retention (its row names the version and the date), which reaches tamper-evident. An
// anchor altered or removed behind the server's back (by whoever holds its disks) fails the
// verify; so does a bundle whose anchored checkpoint is not the bucket's.
func TestVerify_S3Anchor(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, true)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := auditHome(t, fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}\n",
		cfg.Endpoint, cfg.Bucket, cfg.Prefix, creds))
	if r := runAgora(t, env, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("checkpoint: %+v", r)
	}
	for _, s := range []string{srv.Creds.SecretAccessKey} {
		if b, _ := os.ReadFile(filepath.Join(env["AGORA_HOME"], "agora.db")); strings.Contains(string(b), s) {
			t.Error("the secret key is in agora.db")
		}
	}
	bundle := filepath.Join(dir, "bundle.json")
	if r := runAgora(t, env, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	if b, _ := os.ReadFile(bundle); strings.Contains(string(b), srv.Creds.SecretAccessKey) || strings.Contains(string(b), srv.Creds.AccessKeyID) {
		t.Error("the bundle carries a credential")
	}
	pub := filepath.Join(env["AGORA_HOME"], "keys", "audit.pub")
	verifyArgs := []string{"verify", bundle, "--key", pub, "--anchor-bucket", "s3://" + cfg.Bucket + "/" + cfg.Prefix,
		"--anchor-endpoint", cfg.Endpoint, "--anchor-credentials-file", creds}
	sa, _ := standalone(t)
	r := runAgora(t, sa, verifyArgs...)
	if r.code != cmdutil.ExitOK || !strings.Contains(r.stdout, "s3-anchor "+anchor.S3AnchorName("agora", 3)+"\tpass") ||
		!strings.Contains(r.stdout, "COMPLIANCE until") || !strings.Contains(tierRow(r.stdout), "tamper-evident") {
		t.Fatalf("verify against the bucket: %+v", r)
	}
	// Attack: the bundle's evidence names another object (outside the prefix, or another
	// bucket's path): the name is refused, never fetched, and the row fails.
	raw, _ := os.ReadFile(bundle)
	if !strings.Contains(string(raw), `"locator": "`+anchor.S3AnchorName("agora", 3)+`"`) {
		t.Fatal("the bundle has no s3 locator to forge")
	}
	for _, loc := range []string{"../../other-bucket/x", "anchors/agora/../../../x", "/t1/agora/anchors/agora/00000000000000000003"} {
		forged := filepath.Join(dir, "forged.json")
		os.WriteFile(forged, []byte(strings.Replace(string(raw), `"locator": "`+anchor.S3AnchorName("agora", 3)+`"`, `"locator": "`+loc+`"`, 1)), 0o600)
		args := append([]string{"verify", forged}, verifyArgs[2:]...)
		if r := runAgora(t, sa, args...); r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "object name") {
			t.Errorf("verify with the evidence's locator %q: %+v", loc, r)
		}
	}
	// An unlocked copy: the same bytes under the same name in another bucket, written
	// with no retention: the row says it is not locked, not that it is missing.
	cfg2 := srv.Bucket(t, true)
	anchored, err := os.ReadFile(filepath.Join(srv.Dir, cfg.Bucket, "agora", anchor.S3AnchorName("agora", 3)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(t, cfg2).Put(t.Context(), anchor.S3AnchorName("agora", 3), anchored, false, nil); err != nil {
		t.Fatal(err)
	}
	unlocked := append([]string{"verify", bundle, "--key", pub, "--anchor-bucket", "s3://" + cfg2.Bucket + "/" + cfg2.Prefix}, verifyArgs[6:]...)
	if r := runAgora(t, sa, unlocked...); r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "is not locked (no Object Lock retention)") {
		t.Errorf("verify against an unlocked copy: %+v", r)
	}
	// Without --anchor-bucket the s3 evidence is a claim: it passes and raises no tier.
	if r := runAgora(t, sa, "verify", bundle, "--key", pub); r.code != cmdutil.ExitOK || strings.Contains(tierRow(r.stdout), "tamper-evident") {
		t.Errorf("verify without the bucket: %+v", r)
	}
	// The anchored object altered on the server's disk (Object Lock binds the API, not
	// someone with the disks): verify fails and says so.
	obj := filepath.Join(srv.Dir, cfg.Bucket, "agora", anchor.S3AnchorName("agora", 3))
	orig, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(obj, 0o644)
	if err := os.WriteFile(obj, []byte(strings.Replace(string(orig), "\n3\n", "\n2\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runAgora(t, sa, verifyArgs...); r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "not the bundle's anchored checkpoint") {
		t.Errorf("verify with an altered anchor: %+v", r)
	}
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if r := runAgora(t, sa, verifyArgs...); r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "not found") {
		t.Errorf("verify with a removed anchor: %+v", r)
	}
	// A bundle without s3 evidence, checked against a bucket, fails: the auditor asked.
	plain, plainPub := exportBundle(t)
	args := append([]string{"verify", plain, "--key", plainPub}, verifyArgs[4:]...)
	if r := runAgora(t, sa, args...); r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "no s3 anchor evidence") {
		t.Errorf("verify of a bundle without s3 evidence: %+v", r)
	}
}
