package verify_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// testdata/run-bundle-v1.json is a real run bundle (`agora orch audit` of the demo plan: five
// tasks, one needing another's patch); every later agora must keep verifying it.
func readRunGolden(tb testing.TB) ([]byte, verify.Options) {
	tb.Helper()
	data, err := os.ReadFile("testdata/run-bundle-v1.json")
	if err != nil {
		tb.Fatal(err)
	}
	key, err := os.ReadFile("testdata/run-bundle-v1.pub")
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

func TestParseRunBundle_Refuses(t *testing.T) {
	data, _ := readRunGolden(t)
	for name, in := range map[string][]byte{
		"v1 part with subjects": bytes.Replace(data, []byte(verify.FormatV2), []byte(verify.Format), 1),
		"unknown field":         bytes.Replace(data, []byte(`"run": {`), []byte(`"extra": 1, "run": {`), 1),
		"no orch part":          []byte(`{"format":"` + verify.RunFormat + `","run":{"id":"x","name":"y","plan_digest":"z"},"dispatches":null,"orch":null}`),
		"trailing data":         append(append([]byte{}, data...), []byte(`{}`)...),
	} {
		if _, err := verify.ParseRunBundle(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func FuzzVerifyRun(f *testing.F) {
	data, opts := readRunGolden(f)
	// The fuzzer mutates large inputs slowly: seed it with a small, compact bundle cut from
	// the golden one (it fails verification, which exercises every failure path).
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
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
	f.Add(bytes.Replace(small, []byte(`"select":"patch"`), []byte(`"select":"outputs"`), 1))
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
