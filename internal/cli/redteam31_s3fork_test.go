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

// TestRedTeam31_S3AnchorForkBesideTheHonestAnchor: the
// operator holds the audit key and write access to the anchor bucket (agora needs it). The
// honest log's checkpoint 3 is anchored and locked. A forked log of 4 other entries is signed
// with the same key and its checkpoint written by hand as anchors/agora/...4, a new key under
// its own COMPLIANCE lock (agora's own anchoring refuses it: the bucket's 3 is not its prefix;
// a plain PUT does not ask). verify --anchor-bucket checks only the objects the bundle's
// evidence names, so the forked bundle verified tamper-evident beside the honest anchor it
// contradicts. Now every earlier anchor of the log in the bucket must be the root of the
// bundle's first entries (a full export). The honest log's own full bundle, anchored at 5
// with 3 before it, still passes, with a row for 3.
func TestRedTeam31_S3AnchorForkBesideTheHonestAnchor(t *testing.T) {
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
	a := auditHome(t, yaml(honest))
	if r := runAgora(t, a, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 3") {
		t.Fatalf("checkpoint: %+v", r)
	}
	b := forgedHome(t, a, yaml(forgedBucket), "evil-1", "evil-2", "evil-3", "evil-4")
	if r := runAgora(t, b, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 4") {
		t.Fatalf("forged checkpoint: %+v", r)
	}
	name := anchor.S3AnchorName("agora", 4)
	forged, _, err := srv.Client(t, forgedBucket).Get(t.Context(), name, "", 4096)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if _, err := srv.Client(t, honest).Put(t.Context(), name, forged, true, &s3.Lock{Mode: "COMPLIANCE", RetainUntil: until}); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "forged-bundle.json")
	if r := runAgora(t, b, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	sa, _ := standalone(t)
	r := runAgora(t, sa, "verify", bundle, "--key", filepath.Join(a["AGORA_HOME"], "keys", "audit.pub"),
		"--anchor-bucket", "s3://"+honest.Bucket+"/"+honest.Prefix, "--anchor-endpoint", honest.Endpoint, "--anchor-credentials-file", creds)
	if r.code != cmdutil.ExitCheckFailed || strings.Contains(tierRow(r.stdout), "tamper-evident") ||
		!strings.Contains(r.stdout, "s3-anchor "+anchor.S3AnchorName("agora", 3)+"\tFAIL\tthe bucket's checkpoint 3 is not the bundle's first 3 entries") {
		t.Errorf("a forked log anchored beside the honest anchor it contradicts verifies:\n%s%s", r.stdout, r.stderr)
	}
	// The honest agora's next anchoring meets the forged 4 and refuses (held).
	register := func(env map[string]string, names ...string) {
		for _, name := range names {
			src := filepath.Join(dir, name)
			os.MkdirAll(src, 0o755)
			os.WriteFile(filepath.Join(src, "README.md"), []byte("# "+name+"\n"), 0o644)
			if r := runAgora(t, env, "capability", "register", name, "--from", src); r.code != 0 {
				t.Fatalf("register %s: %+v", name, r)
			}
		}
	}
	register(a, "honest-4", "honest-5")
	if r := runAgora(t, a, "audit", "checkpoint"); r.code == 0 || !strings.Contains(r.stderr, "inconsistent with checkpoint 4") {
		t.Errorf("the honest log anchored past the forged 4: %+v", r)
	}
	// An honest log anchored at 3 then 5 in a bucket of its own: its full bundle passes, with
	// a row for the earlier 3.
	clean := srv.Bucket(t, true)
	e := auditHome(t, yaml(clean))
	if r := runAgora(t, e, "audit", "checkpoint"); r.code != 0 {
		t.Fatalf("checkpoint: %+v", r)
	}
	register(e, "clean-4", "clean-5")
	if r := runAgora(t, e, "audit", "checkpoint"); r.code != 0 || !strings.Contains(r.stderr, "wrote checkpoint 5") {
		t.Fatalf("checkpoint 5: %+v", r)
	}
	honestBundle := filepath.Join(dir, "honest-bundle.json")
	if r := runAgora(t, e, "audit", "export", "--out", honestBundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	h := runAgora(t, sa, "verify", honestBundle, "--key", filepath.Join(e["AGORA_HOME"], "keys", "audit.pub"),
		"--anchor-bucket", "s3://"+clean.Bucket+"/"+clean.Prefix, "--anchor-endpoint", clean.Endpoint, "--anchor-credentials-file", creds)
	if h.code != cmdutil.ExitOK || !strings.Contains(h.stdout, "s3-anchor "+anchor.S3AnchorName("agora", 3)+"\tpass\tthe bucket's earlier checkpoint 3 is the bundle's first 3 entries") ||
		!strings.Contains(tierRow(h.stdout), "tamper-evident") {
		t.Errorf("an honest full bundle with an earlier anchor:\n%s%s", h.stdout, h.stderr)
	}
}
