package verify_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// testdata/run-bundle-v2.json is a real run bundle (`agora orch audit` of the demo plan,
// scripts/demo.sh: five tasks, one needing another's patch); every later agora must keep
// verifying it. testdata/run-bundle-v1.json is the same from before selections were signed.
func readRunGolden(tb testing.TB) ([]byte, verify.Options) {
	tb.Helper()
	return readRunFiles(tb, "testdata/run-bundle-v2.json", "testdata/run-bundle-v2.pub")
}

func readRunFiles(tb testing.TB, bundle, pub string) ([]byte, verify.Options) {
	tb.Helper()
	data, err := os.ReadFile(bundle)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := os.ReadFile(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return data, verify.Options{Key: strings.TrimSpace(string(key))}
}

func TestVerifyRun_Golden(t *testing.T) {
	data, opts := readRunGolden(t)
	if !verify.IsRunBundle(data) {
		t.Fatal("IsRunBundle = false for a run bundle")
	}
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.VerifyRun(b, opts)
	if !rep.OK || rep.Tier != verify.TierTamperDetecting {
		t.Fatalf("golden run bundle: ok %v tier %s, failed %+v", rep.OK, rep.Tier, rep.Failed())
	}
	var provenance int
	for _, c := range rep.Checks {
		if c.Check == verify.CheckProvenance {
			provenance++
		}
	}
	if provenance != 1 {
		t.Errorf("%d provenance rows, want 1 (review needs greet-docs' patch)", provenance)
	}
}

// TestVerifyRun_GoldenV1: a run bundle from before selections were signed still parses and
// passes every run check, but both parts' selection rows fail and say what is missing.
func TestVerifyRun_GoldenV1(t *testing.T) {
	data, opts := readRunFiles(t, "testdata/run-bundle-v1.json", "testdata/run-bundle-v1.pub")
	if !verify.IsRunBundle(data) {
		t.Fatal("IsRunBundle = false for a v1 run bundle")
	}
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.VerifyRun(b, opts)
	if rep.OK || rep.Tier != verify.TierNone {
		t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
	}
	var rows []string
	for _, c := range rep.Failed() {
		rows = append(rows, c.Check)
		if !strings.Contains(c.Detail, "agora-audit-bundle/v2 carries no signed selection") {
			t.Errorf("%s: %q, want it to say the signed selection is missing", c.Check, c.Detail)
		}
	}
	if diff := cmp.Diff([]string{"orch selection", "dispatches selection"}, rows); diff != "" {
		t.Errorf("failed rows (-want +got):\n%s", diff)
	}
}

func TestParseRunBundle_Refuses(t *testing.T) {
	data, _ := readRunGolden(t)
	for name, in := range map[string][]byte{
		"v2 with a v2 part": bytes.Replace(data, []byte(verify.Format), []byte(verify.FormatV2), 1),
		"v1 with v3 parts":  bytes.Replace(data, []byte(verify.RunFormat), []byte(verify.RunFormatV1), 1),
		"unknown field":     bytes.Replace(data, []byte(`"run": {`), []byte(`"extra": 1, "run": {`), 1),
		"no orch part":      []byte(`{"format":"` + verify.RunFormat + `","run":{"id":"x","name":"y","plan_digest":"z"},"dispatches":null,"orch":null}`),
		"trailing data":     append(append([]byte{}, data...), []byte(`{}`)...),
	} {
		if _, err := verify.ParseRunBundle(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func FuzzVerifyRun(f *testing.F) {
	data, opts := readRunGolden(f)
	v1, _ := readRunFiles(f, "testdata/run-bundle-v1.json", "testdata/run-bundle-v1.pub")
	// The fuzzer mutates large inputs slowly: seed it with small, compact bundles cut from
	// the golden ones (they fail verification, which exercises every failure path: the
	// signed selection, the attempts' ends, the legacy format).
	for _, golden := range [][]byte{data, v1} {
		b, err := verify.ParseRunBundle(bytes.NewReader(golden))
		if err != nil {
			f.Fatal(err)
		}
		b.Orch.Entries, b.Orch.Selection.Count = b.Orch.Entries[:2], 2
		b.Dispatches.Entries, b.Dispatches.Selection.Count = b.Dispatches.Entries[:2], 2
		b.Dispatches.Manifests = b.Dispatches.Manifests[:1]
		small, err := json.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(small)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := verify.ParseRunBundle(bytes.NewReader(data))
		if err != nil {
			return
		}
		rep := verify.VerifyRun(b, opts)
		if rep.OK != (len(rep.Failed()) == 0) || (rep.OK && rep.Tier == verify.TierNone) {
			t.Errorf("report ok %v tier %s with %d failed rows", rep.OK, rep.Tier, len(rep.Failed()))
		}
	})
}

// TestVerifyRun_CatchesHiddenEnd removes one dispatch's terminal entry and its manifest from a
// real run bundle: the task's products vanish from the record while
// orch.db says it succeeded. Before, every row passed and "run dispatches" said every attempt
// had its entries. Now the signed selection no longer matches, and the run's own check names
// the attempt whatever the selection says: it needs one terminal entry and its manifest.
func TestVerifyRun_CatchesHiddenEnd(t *testing.T) {
	data, opts := readRunGolden(t)
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// tidy-b's dispatch: no task needs its products, so provenance is untouched.
	var victim string
	for _, e := range b.Orch.Entries {
		f, err := verify.DecodeEntry(e.Entry)
		if err == nil && f.Kind == "orch.task.succeeded" && strings.HasSuffix(f.Subject, "/task/tidy-b") {
			victim = f.Details["dispatch_id"].(string)
		}
	}
	var ref string
	var kept []verify.Entry
	for _, e := range b.Dispatches.Entries {
		f, err := verify.DecodeEntry(e.Entry)
		if err != nil {
			t.Fatal(err)
		}
		if f.Subject == "dispatch/"+victim && f.Kind == "dispatch.finished" {
			ref = f.Details["manifest"].(string)
			continue
		}
		kept = append(kept, e)
	}
	if victim == "" || ref == "" {
		t.Fatal("fixture: no finished dispatch of task tidy-b")
	}
	b.Dispatches.Entries, b.Dispatches.Selection.Count = kept, len(kept)
	var manifests []verify.Manifest
	for _, m := range b.Dispatches.Manifests {
		if sum := sha256.Sum256(m.Manifest); "sha256:"+hex.EncodeToString(sum[:]) != ref {
			manifests = append(manifests, m)
		}
	}
	if len(manifests) != len(b.Dispatches.Manifests)-1 {
		t.Fatalf("fixture: manifest %s is not carried once", ref)
	}
	b.Dispatches.Manifests = manifests
	rep := verify.VerifyRun(b, opts)
	if rep.OK || rep.Tier != verify.TierNone {
		t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
	}
	var rows []string
	for _, c := range rep.Failed() {
		rows = append(rows, strings.TrimSpace(c.Check+" "+c.Item))
		if c.Check == verify.CheckDispatches && !strings.Contains(c.Detail, "no terminal entry") {
			t.Errorf("run dispatches row %q, want it to name the missing terminal entry", c.Detail)
		}
	}
	if diff := cmp.Diff([]string{"dispatches selection", "run dispatches " + victim}, rows); diff != "" {
		t.Errorf("failed rows (-want +got):\n%s", diff)
	}
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail, "has its dispatch entries") {
			t.Errorf("row %q says %q", c.Check, c.Detail)
		}
	}
}

// TestVerifyRun_PartOfAnotherRun: a part whose signed selection names another run (or none)
// cannot stand in for this run's.
func TestVerifyRun_PartOfAnotherRun(t *testing.T) {
	data, opts := readRunGolden(t)
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b.Dispatches.Selection.Run = "01OTHERRUN"
	rep := verify.VerifyRun(b, opts)
	var rows []string
	for _, c := range rep.Failed() {
		rows = append(rows, c.Check)
	}
	if diff := cmp.Diff([]string{"dispatches selection", "run"}, rows); diff != "" {
		t.Errorf("failed rows (-want +got):\n%s", diff)
	}
}
