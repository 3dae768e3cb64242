package verify

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
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
		// An entry's text decoded where it stands (base64InPlace): newlines, which the base64
		// decoder skips, four at a time so the length is still a multiple of 4; an escape;
		// padding inside the text; an empty text.
		rep(`"entry": "`, "\"entry\": \"\n\n\n\n"),
		rep(`"entry": "`, "\"entry\": \"\r\n\r\n"),
		rep(`"entry": "`, `"entry": "\u0041AAA`),
		rep(`"entry": "`, `"entry": "AA==`),
		rep(`"entry": "`, `"entry": "", "x": "`),
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

// TestDecodeHash_MatchesStdEncoding: the hash decoder takes a 44-character text only when it
// is the canonical base64 of 32 bytes (the strict decoder's, zero padding bits), and gives
// the same bytes.
func TestDecodeHash_MatchesStdEncoding(t *testing.T) {
	texts := []string{
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuF==",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFUA",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hS-FU=",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hS\nU=",
		"=7DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
		"////////////////////////////////////////////=",
		"//////////////////////////////////////////8=",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	}
	for _, text := range texts {
		checkDecodeHash(t, []byte(text))
	}
}

func FuzzDecodeHash(f *testing.F) {
	f.Add([]byte("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="))
	f.Fuzz(func(t *testing.T, text []byte) { checkDecodeHash(t, text) })
}

func checkDecodeHash(t *testing.T, text []byte) {
	t.Helper()
	var dst [64]byte
	got := decodeHash(dst[:], text)
	want := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Strict().Decode(want, text)
	if err == nil && base64.StdEncoding.EncodedLen(n) != len(text) {
		err = errors.New("line breaks: not canonical")
	}
	if got && (err != nil || n != HashSize || !bytes.Equal(dst[:HashSize], want[:n])) {
		t.Fatalf("%q: decodeHash took it as %x, StdEncoding gives %x, %v", text, dst[:HashSize], want[:n], err)
	}
	if !got && err == nil && n == HashSize && len(text) == 44 {
		t.Fatalf("%q: decodeHash refused the base64 of 32 bytes", text)
	}
}

// TestScanBundle_Parallel: a bundle large enough to be read on every CPU is read as the
// strict reading reads it, with its parts' guesses checked; a guess that lands in a value
// after the entries (a large manifest) makes the read fall back to one part, still right.
func TestScanBundle_Parallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("SKIP: one CPU: the entries are never read in parts")
	}
	smallScanSplit(t) // 64 KiB: the split is the same code at any size
	b := &Bundle{Format: Format, Entries: []Entry{}, Manifests: []Manifest{}}
	for i := range 300 {
		e := Entry{Index: uint64(i), Entry: []byte(fmt.Sprintf(`{"n":%d}`, i)), LeafHash: bytes.Repeat([]byte{byte(i)}, 32)}
		for k := range 17 {
			e.InclusionProof = append(e.InclusionProof, bytes.Repeat([]byte{byte(i + k)}, 32))
		}
		b.Entries = append(b.Entries, e)
	}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if len(data) < parallelScanFrom {
		t.Fatalf("fixture: %d bytes, below %d", len(data), parallelScanFrom)
	}
	start := bytes.Index(data, []byte(`"entries": [`)) + len(`"entries": [`)
	s := &scanner{b: data, i: start}
	s.ws()
	es, ok := s.entriesParallel()
	if !ok || !reflect.DeepEqual(es, b.Entries) {
		t.Fatalf("read in parts: ok %v, %d entries, want the %d written", ok, len(es), len(b.Entries))
	}
	matchStrict(t, 0, data)

	// A manifest after the entries as large as they are: the last guesses land in it.
	b.Manifests = []Manifest{{Manifest: bytes.Repeat([]byte(`{"x":{}}`), len(data)/8)}}
	buf.Reset()
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	data = buf.Bytes()
	s = &scanner{b: data, i: start}
	s.ws()
	if _, ok := s.entriesParallel(); ok {
		t.Error("read in parts with guesses past the entries' end")
	}
	matchStrict(t, 1, data)
	got, err := ParseBundleBytes(data)
	if err != nil || len(got.Entries) != len(b.Entries) {
		t.Fatalf("got %v, %d entries", err, len(got.Entries))
	}
}

// The alias test's strict variant is one the scanner hands to the strict reading.
func TestScanBundle_EscapedKeyIsTheStrictReadings(t *testing.T) {
	golden := scanSeeds(t)[0]
	strict := bytes.Replace(golden, []byte(`"format"`), []byte(`"\u0066ormat"`), 1)
	if _, ok := scanBundle(strict); ok {
		t.Fatal("the scanner took an escaped key")
	}
	if _, err := parseBundleStrict(strict); err != nil {
		t.Fatalf("the strict reading refuses the escaped key: %v", err)
	}
}

// TestScanBundle_SharedProofHashes: a proof hash whose string is the one at the same place of
// the previous proof is that hash again, stored once; a hash at another place, one a
// character apart, or one the previous proof did not have is decoded on its own. The bundle
// read is the strict reading's in every case.
func TestScanBundle_SharedProofHashes(t *testing.T) {
	b, err := parseBundleStrict(scanSeeds(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	h := func(c byte) []byte { return bytes.Repeat([]byte{c}, HashSize) }
	x := h('a')
	x[HashSize-1] = 'b' // its text differs from h('a')'s in one character
	proofs := [][][]byte{{h('a'), h('b'), h('c')}, {h('a'), x, h('c'), h('d')}, {h('c'), h('a'), h('c'), h('d')}, {}}
	e := b.Entries[0]
	b.Entries = nil
	for i, p := range proofs {
		e.Index, e.InclusionProof = uint64(i), p
		b.Entries = append(b.Entries, e)
	}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	matchStrict(t, 0, buf.Bytes())
	got, ok := scanBundle(buf.Bytes())
	if !ok {
		t.Fatal("the scanner does not take the bundle")
	}
	for i, p := range proofs {
		if !reflect.DeepEqual(got.Entries[i].InclusionProof, p) {
			t.Fatalf("entry %d: proof %x, want %x", i, got.Entries[i].InclusionProof, p)
		}
	}
	same := func(a, b []byte) bool { return &a[0] == &b[0] }
	p0, p1, p2 := got.Entries[0].InclusionProof, got.Entries[1].InclusionProof, got.Entries[2].InclusionProof
	if !same(p0[0], p1[0]) || !same(p0[2], p1[2]) {
		t.Error("a hash at the same place of the previous proof was stored twice")
	}
	if same(p0[1], p1[1]) || same(p1[0], p2[1]) || same(p1[3], p2[0]) {
		t.Error("a hash was shared with another text or another place")
	}
	if !same(p1[3], p2[3]) {
		t.Error("the fourth hash, at the same place, was not shared")
	}
}
