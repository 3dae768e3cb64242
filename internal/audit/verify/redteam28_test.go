package verify_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// The audit vocabulary moved to internal/audit/entry and the
// Batcher prepares its statements once. Logs written before must verify byte for byte.
//
// testdata/bundle-pre28.json was exported by the agora binary built from 99408dd (the
// vocabulary before internal/audit/entry)
// from a real home: `agora init`, `agora apply` of examples/catalog and examples/exec-agent,
// `agora dispatch run --subagent changelog` (needs_input) and `agora dispatch resume --answer
// Fixed` (a child that finished). testdata/bundle-pre28-mixed.json is the same log after
// main's binary (main at 8c4abfa) dispatched once more and applied again, exported by main's binary:
// old and new entries in one tree. testdata/audit-pre28.pub is that home's key. Never rewrite
// them: they pin what older binaries wrote.
const (
	pre28Bundle      = "testdata/bundle-pre28.json"
	pre28MixedBundle = "testdata/bundle-pre28-mixed.json"
	pre28Key         = "testdata/audit-pre28.pub"
)

func verifyFile(t *testing.T, data []byte) *verify.Report {
	t.Helper()
	key, err := os.ReadFile(pre28Key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return verify.Verify(b, verify.Options{Key: string(key)})
}

// TestRedTeam28_PreChangeBundlesVerify: bundles of a log the 99408dd binary wrote, alone and
// with main's entries appended, verify with main's verifier; every kind in them is one
// internal/audit/entry names.
func TestRedTeam28_PreChangeBundlesVerify(t *testing.T) {
	for _, name := range []string{pre28Bundle, pre28MixedBundle} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rep := verifyFile(t, data)
		if !rep.OK || rep.Tier != verify.TierTamperDetecting {
			t.Errorf("%s: ok %v tier %s, failed %+v", name, rep.OK, rep.Tier, rep.Failed())
		}
		var bundle struct {
			Entries []struct {
				Entry string `json:"entry"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(data, &bundle); err != nil {
			t.Fatal(err)
		}
		known := entry.Kinds()
		for i, e := range bundle.Entries {
			raw, err := base64.StdEncoding.DecodeString(e.Entry)
			if err != nil {
				t.Fatal(err)
			}
			var v struct{ Kind string }
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(known, v.Kind) && !strings.HasPrefix(v.Kind, "catalog.") && !strings.HasPrefix(v.Kind, "dispatch.") {
				t.Errorf("%s entry %d: kind %q is no kind internal/audit/entry names", name, i, v.Kind)
			}
		}
	}
}

// TestRedTeam28_PreChangeBundleTampered: the same old bundle with one entry's kind rewritten
// (a needs_input made a failure) or one entry dropped fails, and names the check.
func TestRedTeam28_PreChangeBundleTampered(t *testing.T) {
	data, err := os.ReadFile(pre28Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	entries := b["entries"].([]any)
	edit := func(f func(es []any) []any) []byte {
		var c map[string]any
		_ = json.Unmarshal(data, &c)
		c["entries"] = f(c["entries"].([]any))
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var needs int = -1
	for i, e := range entries {
		raw, _ := base64.StdEncoding.DecodeString(e.(map[string]any)["entry"].(string))
		if bytes.Contains(raw, []byte(`"kind":"`+entry.DispatchNeedsInput+`"`)) {
			needs = i
		}
	}
	if needs < 0 {
		t.Fatal("the old bundle holds no dispatch.needs_input entry")
	}
	tests := map[string]struct {
		data  []byte
		check string
	}{
		"kind rewritten": {edit(func(es []any) []any {
			e := es[needs].(map[string]any)
			raw, _ := base64.StdEncoding.DecodeString(e["entry"].(string))
			e["entry"] = base64.StdEncoding.EncodeToString(bytes.Replace(raw, []byte(entry.DispatchNeedsInput), []byte(entry.DispatchFailed), 1))
			return es
		}), verify.CheckEntry},
		"entry dropped": {edit(func(es []any) []any { return slices.Delete(es, needs, needs+1) }), verify.CheckSelection},
	}
	for name, tt := range tests {
		rep := verifyFile(t, tt.data)
		if rep.OK || rep.Tier != verify.TierNone {
			t.Errorf("%s: ok %v tier %s, want a failure", name, rep.OK, rep.Tier)
			continue
		}
		if !slices.ContainsFunc(rep.Failed(), func(r verify.Result) bool { return r.Check == tt.check }) {
			t.Errorf("%s: failed rows %+v, want one of check %s", name, rep.Failed(), tt.check)
		}
	}
}
