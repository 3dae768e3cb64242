package service_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam44R_ReviewAuditNamesFinal: the signed run bundle says which answer each review
// was read from. The reviewer's dispatch terminal entry names the digest of the final answer
// its worker vouched for (final_digest), its manifest names the same (products.final), and
// it is the digest of the record's final answer and of its final.md output; orch.db's
// reviewer entry holds the review read from it and orch.task.reviewed the quorum. agora
// verify passes the bundle, and fails it once the final digest is stripped from the manifest.
func TestRedTeam44R_ReviewAuditNamesFinal(t *testing.T) {
	e, _ := reviewEnv(t, "")
	e.editors(map[string]string{"coder": `printf 'x\n' > x.txt`})
	out, ok := e.submit("version: 1\nname: audited\ndefaults: {env: [model]}\ntasks:\n  - id: work\n    subagent: coder\n" +
		"    review: {subagents: [r-approve, r-prose], approve: 1}\n")
	if !ok {
		t.Fatalf("the run failed:\n%s", out)
	}
	_, byID := e.statusOf("audited")
	want := map[string]string{} // reviewer dispatch -> the digest of its final answer
	for _, rv := range []string{"work.review-r-approve", "work.review-r-prose"} {
		r := byID[rv]
		if r.State != lifecycle.TaskSucceeded {
			t.Fatalf("%s: %s %s (%s)", rv, r.State, r.Reason, r.Detail)
		}
		var rec struct {
			Final *struct {
				Digest string `json:"digest"`
			} `json:"final"`
			Outputs []struct {
				Path, Digest string
			} `json:"outputs"`
		}
		must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", r.DispatchID, "-o", "json")), &rec))
		if rec.Final == nil {
			t.Fatalf("%s's record keeps no final answer", rv)
		}
		for _, o := range rec.Outputs {
			if o.Path == "final.md" && o.Digest != rec.Final.Digest {
				t.Errorf("%s: final.md is %s, the final answer %s", rv, o.Digest, rec.Final.Digest)
			}
		}
		want[r.DispatchID] = rec.Final.Digest
	}
	if v := byID["work.review-r-prose"].Review; v == nil || !v.Invalid {
		t.Errorf("r-prose's review %+v, want an invalid one (its answer is prose)", v)
	}

	bundle := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", "audited", "--out", bundle)
	pub := filepath.Join(e.home, "keys", "audit.pub")
	if code, stdout := verifyFile(t, bundle, pub); code != 0 {
		t.Fatalf("agora verify of the honest run: exit %d\n%s", code, stdout)
	}
	raw, err := os.ReadFile(bundle)
	must(t, err)
	b, err := verify.ParseRunBundle(bytes.NewReader(raw))
	must(t, err)
	named := map[string]string{} // dispatch -> final_digest of its terminal entry
	for _, x := range b.Dispatches.Entries {
		f, err := verify.DecodeEntry(x.Entry)
		must(t, err)
		if f.Kind == "dispatch.finished" {
			d, _ := f.Details["final_digest"].(string)
			named[strings.TrimPrefix(f.Subject, "dispatch/")] = d
		}
	}
	strip := -1
	for i, m := range b.Dispatches.Manifests {
		var doc struct {
			Dispatch string
			Products map[string]any
		}
		must(t, json.Unmarshal(m.Manifest, &doc))
		d, isReviewer := want[doc.Dispatch]
		if !isReviewer {
			continue
		}
		if named[doc.Dispatch] != d || doc.Products["final"] != d {
			t.Errorf("reviewer dispatch %s: its end names final %q, its manifest %v; want %s", doc.Dispatch, named[doc.Dispatch], doc.Products["final"], d)
		}
		strip = i
	}
	if strip < 0 {
		t.Fatal("the bundle carries no reviewer's manifest")
	}
	// Without the final digest, the manifest no longer binds to its end.
	var doc map[string]any
	must(t, json.Unmarshal(b.Dispatches.Manifests[strip].Manifest, &doc))
	delete(doc["products"].(map[string]any), "final")
	stripped, err := json.Marshal(doc)
	must(t, err)
	b.Dispatches.Manifests[strip].Manifest = stripped
	var buf bytes.Buffer
	must(t, verify.WriteRunBundle(&buf, b))
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	must(t, os.WriteFile(tampered, buf.Bytes(), 0o600))
	code, stdout := verifyFile(t, tampered, pub)
	sum := sha256.Sum256(stripped)
	if code == 0 || !strings.Contains(stdout, "FAIL") {
		t.Errorf("agora verify of the bundle without the final digest (manifest now sha256:%s): exit %d\n%s", hex.EncodeToString(sum[:]), code, stdout)
	}
}
