package verify

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
)

// scanSeeds are bundles the scanner must take (the golden bundle) and near misses it must
// hand to the strict reading: escapes, nulls, repeated and folded keys, other number forms.
func scanSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	golden, err := os.ReadFile("testdata/bundle-v3.json")
	if err != nil {
		tb.Fatal(err)
	}
	rep := func(old, new string) []byte { return bytes.Replace(golden, []byte(old), []byte(new), 1) }
	return [][]byte{
		golden,
		rep(`"index": 2`, `"index": 02`),
		rep(`"index": 2`, `"index": 2.0`),
		rep(`"index": 2`, `"index": 2e0`),
		rep(`"index": 2`, `"index": -2`),
		rep(`"index": 2`, `"index": 18446744073709551616`),
		rep(`"index": 2`, `"index": 2, "index": 2`),
		rep(`"index": 2`, `"Index": 2`),
		rep(`"index": 2`, `"\u0069ndex": 2`),
		rep(`"leaf_hash": "`, `"leaf_hash": null, "x": "`),
		rep(`"leaf_hash": "`, `"leaf_hash": "\/`),
		rep(`"leaf_hash": "`, `"leaf_hash": "!`),
		rep(`"inclusion_proof": [`, `"inclusion_proof": null, "y": [`),
		rep(`"entries": [`, `"entries": null, "x": [`),
		rep(`"entries": [`, `"entries": [], "x": [`),
		rep(`"format"`, `"format": "x", "format"`),
		rep(`"manifests"`, `"Manifests"`),
		rep(`"key"`, `"ORIGIN": "x", "key"`),
		rep(`"leaf_hash"`, `"leaf_hash2": "", "leaf_hash"`),
		append(bytes.Clone(golden), `{}`...),
		append(bytes.Clone(golden), " \n\t"...),
		[]byte(`{"format":"agora-audit-bundle/v3","entries":[{"index":0,"entry":"","leaf_hash":"","inclusion_proof":[]}],"manifests":[]}`),
		[]byte(`{"entries":[{},{"index":0}],"manifests":[] }`),
		[]byte(`{"entries":[{"index":0,}],"manifests":[]}`),
		[]byte(`{"entries":[{"index":0}],,"manifests":[]}`),
		[]byte(`{"entries":[{"index":0}` + "\x00" + `],"manifests":[]}`),
		[]byte(`{"origin":"\xff","entries":[],"manifests":[]}`),
		[]byte(`[`),
		[]byte(``),
	}
}

// TestScanBundle_MatchesStrict: every seed gets from ParseBundleBytes what the strict reading
// of the whole document gives: the same bundle, or an error (the same error).
func TestScanBundle_MatchesStrict(t *testing.T) {
	seeds := scanSeeds(t)
	if _, ok := scanBundle(seeds[0]); !ok {
		t.Fatal("the scanner does not take the golden bundle: the fast path is never used")
	}
	for i, data := range seeds {
		matchStrict(t, i, data)
	}
}

// FuzzScanBundle_MatchesStrict: whatever the input, the scanner never panics, takes only what
// the strict reading takes, with the same value, and ParseBundleBytes answers as it does.
func FuzzScanBundle_MatchesStrict(f *testing.F) {
	for _, s := range scanSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { matchStrict(t, 0, data) })
}

func matchStrict(t *testing.T, i int, data []byte) {
	t.Helper()
	want, wantErr := parseBundleStrict(data)
	if scanned, ok := scanBundle(data); ok {
		var strict Bundle
		if err := strictUnmarshalBundle(data, &strict); err != nil {
			t.Fatalf("seed %d: the scanner took a bundle the strict reading refuses: %v", i, err)
		}
		if !reflect.DeepEqual(*scanned, strict) {
			t.Fatalf("seed %d: the scanner read another bundle than the strict reading", i)
		}
	}
	got, err := ParseBundleBytes(data)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("seed %d: got error %v, the strict reading %v", i, err, wantErr)
	case err != nil && (err.Error() != wantErr.Error() || !errors.Is(err, ErrBundle)):
		t.Fatalf("seed %d: got error %q, the strict reading %q", i, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("seed %d: got another bundle than the strict reading", i)
	}
}
