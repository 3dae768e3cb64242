package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/s3"
)

// TestRedTeam31_S3AnchorOverwrittenByANewVersion: Object Lock keeps a locked
// object VERSION from being deleted or shortened, but a plain PUT (no If-None-Match) to the
// same key makes a new current version, which S3 and versitygw both accept. An operator who
// forks the log (here: a second home with the same audit key whose log of the same size holds
// other entries) writes its checkpoint as a new version of the anchored object, under a fresh
// COMPLIANCE lock. `agora verify --anchor-bucket` must not take that later version as the
// anchor: the first, locked version holds another checkpoint, and the bundle must fail.
func TestRedTeam31_S3AnchorOverwrittenByANewVersion(t *testing.T) {
	srv := s3test.Shared(t)
	honest := srv.Bucket(t, true)
	forgedBucket := srv.Bucket(t, true)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := func(c s3.Config) string {
		return fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}\n",
			c.Endpoint, c.Bucket, c.Prefix, creds)
	}
	// The honest history: three registrations, checkpoint 3 anchored and locked.
	a := auditHome(t, yaml(honest))
	if r := runAgora(t, a, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("checkpoint: %+v", r)
	}
	// The forged history: the same audit key, three other registrations.
	b := forgedHome(t, a, yaml(forgedBucket), "evil-tools", "more-evil", "most-evil")
	if r := runAgora(t, b, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("forged checkpoint: %+v", r)
	}
	name := anchor.S3AnchorName("agora", 3)
	forged, _, err := srv.Client(t, forgedBucket).Get(t.Context(), name, "", 4096)
	if err != nil {
		t.Fatal(err)
	}
	hc := srv.Client(t, honest)
	orig, _, err := hc.Get(t.Context(), name, "", 4096)
	if err != nil || string(orig) == string(forged) {
		t.Fatalf("the two histories' checkpoints: same %v, %v", string(orig) == string(forged), err)
	}
	// The forger's write into the honest bucket: a new version, no If-None-Match, locked.
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if _, err := hc.Put(t.Context(), name, forged, false, &s3.Lock{Mode: "COMPLIANCE", RetainUntil: until}); err != nil {
		t.Skipf("SKIP: the server refused a new version of a locked object (%v); the attack needs one", err)
	}
	bundle := filepath.Join(dir, "forged-bundle.json")
	if r := runAgora(t, b, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	sa, _ := standalone(t)
	r := runAgora(t, sa, "verify", bundle, "--key", filepath.Join(a["AGORA_HOME"], "keys", "audit.pub"),
		"--anchor-bucket", "s3://"+honest.Bucket+"/"+honest.Prefix, "--anchor-endpoint", honest.Endpoint, "--anchor-credentials-file", creds)
	if r.code != cmdutil.ExitCheckFailed || strings.Contains(tierRow(r.stdout), "tamper-evident") || !strings.Contains(r.stdout, "holds 2 versions of the object") {
		t.Errorf("a forked log whose checkpoint was written as a new version over the locked anchor verifies:\n%s%s", r.stdout, r.stderr)
	}
}

// forgedHome is a home holding honest's audit key and a log of its own: one registration per
// name (a forger who has the host's key rewrites history).
func forgedHome(t *testing.T, honest map[string]string, yaml string, names ...string) map[string]string {
	t.Helper()
	a := honest
	bdir := t.TempDir()
	b := map[string]string{"AGORA_HOME": filepath.Join(bdir, "agora"), "HOME": bdir, "USER": "tester"}
	if r := runAgora(t, b, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	for _, k := range []string{"audit.key", "audit.pub"} {
		key, err := os.ReadFile(filepath.Join(a["AGORA_HOME"], "keys", k))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b["AGORA_HOME"], "keys", k), key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b["AGORA_HOME"], "agora.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		src := filepath.Join(bdir, name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "README.md"), []byte("# "+name+"\n"), 0o644)
		if r := runAgora(t, b, "capability", "register", name, "--from", src); r.code != 0 {
			t.Fatalf("register %s: %+v", name, r)
		}
	}
	return b
}

// TestRedTeam31_S3AnchorBucketWithoutLock: an anchor bucket without Object Lock
// (so without versioning: anyone with write access rewrites an anchor in place) is never taken
// silently: the checkpoint's anchor fails naming Object Lock, and doctor's anchor row fails.
func TestRedTeam31_S3AnchorBucketWithoutLock(t *testing.T) {
	srv := s3test.Shared(t)
	plain := srv.Bucket(t, false)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := srv.Bucket(t, true)
	env := auditHome(t, fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}\n",
		plain.Endpoint, plain.Bucket, plain.Prefix, creds))
	r := runAgora(t, env, "audit", "checkpoint")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "Object Lock") {
		t.Errorf("a checkpoint anchored to a bucket without Object Lock: %+v", r)
	}
	// doctor, with the locked bucket as a second anchor: that one passes.
	yaml := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %[1]q, bucket: %[2]s, retention: 1d, credentials_file: %[4]s}\n    - s3: {endpoint: %[1]q, bucket: %[3]s, retention: 1d, credentials_file: %[4]s}\n",
		plain.Endpoint, plain.Bucket, locked.Bucket, creds)
	if err := os.WriteFile(filepath.Join(env["AGORA_HOME"], "agora.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := runAgora(t, env, "doctor")
	rows := map[string]string{}
	for _, line := range strings.Split(d.stdout, "\n") {
		if name, rest, ok := strings.Cut(line, "\t"); ok {
			rows[name] = rest
		}
	}
	if got := rows["anchor bucket 0"]; strings.HasPrefix(got, "ok") || !strings.Contains(got, "Object Lock is not enabled") {
		t.Errorf("doctor on an anchor bucket without Object Lock: %q", got)
	}
	if got := rows["anchor bucket 1"]; !strings.HasPrefix(got, "ok\t") {
		t.Errorf("doctor on an anchor bucket with Object Lock: %q", got)
	}
}

// TestRedTeam31_S3AnchorHiddenByADeleteMarker: Object Lock
// refuses deleting a locked version, not a DELETE without a version id, which puts a delete
// marker over it and hides the key from ListObjectsV2. The operator hides the latest honest
// anchor (5) that way and restores the database to a copy taken at checkpoint 3; agora's own
// anchoring lists only 3, finds its fork consistent with it and anchors the fork's checkpoint
// 6, and verify --anchor-bucket passed the forked bundle. Now a delete marker (or a second
// version) among the log's anchors stops the anchoring and fails verify.
func TestRedTeam31_S3AnchorHiddenByADeleteMarker(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.Bucket(t, true)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := auditHome(t, fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\naudit:\n  anchors:\n    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}\n",
		bucket.Endpoint, bucket.Bucket, bucket.Prefix, creds))
	if r := runAgora(t, a, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("checkpoint: %+v", r)
	}
	db := filepath.Join(a["AGORA_HOME"], "agora.db")
	saved, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	register := func(names ...string) {
		for _, name := range names {
			src := filepath.Join(dir, name)
			os.MkdirAll(src, 0o755)
			os.WriteFile(filepath.Join(src, "README.md"), []byte("# "+name+"\n"), 0o644)
			if r := runAgora(t, a, "capability", "register", name, "--from", src); r.code != 0 {
				t.Fatalf("register %s: %+v", name, r)
			}
		}
	}
	register("honest-4", "honest-5")
	if r := runAgora(t, a, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 5") {
		t.Fatalf("checkpoint 5: %+v", r)
	}
	c := srv.Client(t, bucket)
	if err := c.Delete(t.Context(), anchor.S3AnchorName("agora", 5), ""); err != nil {
		t.Fatalf("a delete marker over the locked anchor: %v", err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	if err := os.WriteFile(db, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	register("forged-4", "forged-5", "forged-6")
	r := runAgora(t, a, "audit", "checkpoint")
	if r.code == 0 || !strings.Contains(r.stderr, "delete marker over it") {
		t.Errorf("the rolled-back log's checkpoint was anchored past the hidden anchor 5: %+v", r)
	}
	if _, _, err := c.Get(t.Context(), anchor.S3AnchorName("agora", 6), "", 4096); err == nil {
		t.Error("the bucket holds the rolled-back log's checkpoint 6")
	}
	bundle := filepath.Join(dir, "rolled-back.json")
	if r := runAgora(t, a, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	sa, _ := standalone(t)
	v := runAgora(t, sa, "verify", bundle, "--key", filepath.Join(a["AGORA_HOME"], "keys", "audit.pub"),
		"--anchor-bucket", "s3://"+bucket.Bucket+"/"+bucket.Prefix, "--anchor-endpoint", bucket.Endpoint, "--anchor-credentials-file", creds)
	if v.code != cmdutil.ExitCheckFailed || !strings.Contains(v.stdout, "s3-anchor anchors/agora/\tFAIL\tthe anchor "+anchor.S3AnchorName("agora", 5)+" has a delete marker over it") {
		t.Errorf("verify with a hidden anchor in the bucket: %+v", v)
	}
}
