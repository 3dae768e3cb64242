package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// streamFixtures are the bundles of testdata with their keys.
func streamFixtures(t testing.TB) map[string]struct {
	data []byte
	opts Options
} {
	t.Helper()
	out := map[string]struct {
		data []byte
		opts Options
	}{}
	for _, f := range []struct{ bundle, pub string }{
		{"bundle-v3.json", "audit-v3.pub"},
		{"bundle-pre28.json", "audit-pre28.pub"},
		{"bundle-pre28-mixed.json", "audit-pre28.pub"},
		{"bundle-v1.json", "audit.pub"},
	} {
		data, err := os.ReadFile("testdata/" + f.bundle)
		if err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile("testdata/" + f.pub)
		if err != nil {
			t.Fatal(err)
		}
		out[f.bundle] = struct {
			data []byte
			opts Options
		}{data, Options{Key: string(key)}}
	}
	return out
}

// streamed reads data with the streaming verifier, keeping a copy of every entry it read on
// its last pass.
func streamed(t testing.TB, data []byte, opts Options) (*Report, *Bundle, error) {
	t.Helper()
	var es []Entry
	hook := &streamHook{start: func() { es = []Entry{} }, entry: func(e Entry) {
		c := Entry{Index: e.Index, Entry: bytes.Clone(e.Entry), LeafHash: bytes.Clone(e.LeafHash)}
		if e.InclusionProof != nil {
			c.InclusionProof = make([][]byte, len(e.InclusionProof))
			for i, h := range e.InclusionProof {
				c.InclusionProof[i] = bytes.Clone(h)
			}
		}
		es = append(es, c)
	}}
	rep, b, err := verifyStream(context.Background(), bytes.NewReader(data), int64(len(data)), opts, hook)
	if b != nil {
		b.Entries = es
	}
	return rep, b, err
}

// matchStream holds the streaming verifier to the whole-file one on data: it parses exactly
// the bundles ParseBundleBytes parses (bundles of at most MaxBundleSize), with the same
// fields and entries, and its report has the same verdict, tier and rows, but for the
// passing entry and inclusion rows, which it counts instead of listing.
func matchStream(t *testing.T, name string, data []byte, opts Options) {
	t.Helper()
	want, wantErr := ParseBundleBytes(data)
	rep, got, err := streamed(t, data, opts)
	if errors.Is(err, ErrRunBundle) {
		if wantErr == nil {
			t.Fatalf("%s: the stream called a bundle the whole reading parses a run bundle", name)
		}
		return
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%s: stream error %v, whole-file error %v", name, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrBundle) {
			t.Fatalf("%s: stream error %v does not match ErrBundle", name, err)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the stream read another bundle than the whole reading", name)
	}
	whole := Verify(want, opts)
	if rep.OK != whole.OK || rep.Tier != whole.Tier || rep.KeySource != whole.KeySource ||
		rep.TrustedTime != whole.TrustedTime || rep.TSARoot != whole.TSARoot {
		t.Fatalf("%s: stream ok %v tier %s, whole ok %v tier %s; stream failed %+v, whole %+v",
			name, rep.OK, rep.Tier, whole.OK, whole.Tier, rep.Failed(), whole.Failed())
	}
	if w, g := listedRows(whole), listedRows(rep); !slices.Equal(w, g) {
		t.Fatalf("%s: rows differ:\nwhole  %+v\nstream %+v", name, w, g)
	}
	var entries, inclusions int
	for _, c := range whole.Checks {
		if c.OK && c.Item != "" && c.Check == CheckEntry {
			entries++
		}
		if c.OK && c.Item != "" && c.Check == CheckInclusion {
			inclusions++
		}
	}
	if entries+inclusions > 0 && !slices.ContainsFunc(rep.Checks, func(c Result) bool {
		return c.OK && c.Check == CheckEntry && c.Item == ""
	}) == (entries > 0) {
		t.Fatalf("%s: %d passing entry rows, and the stream's count row is missing", name, entries)
	}
}

// listedRows are a report's rows but the passing entry and inclusion rows (listed one per
// entry by Verify, counted in one row each by VerifyStream).
func listedRows(r *Report) []Result {
	var out []Result
	for _, c := range r.Checks {
		if c.OK && (c.Check == CheckEntry || c.Check == CheckInclusion) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// TestVerifyStream_MatchesWholeFile: every testdata bundle, every forgery of the attack tests
// and every seed of the scanner's fuzz target gets the whole-file reading's parse, verdict
// and rows from the streaming verifier.
func TestVerifyStream_MatchesWholeFile(t *testing.T) {
	fixtures := streamFixtures(t)
	for name, f := range fixtures {
		matchStream(t, name, f.data, f.opts)
		rep, _, err := streamed(t, f.data, f.opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "bundle-v3.json" && !rep.OK {
			t.Fatalf("%s does not verify streamed: %+v", name, rep.Failed())
		}
	}
	pre28 := fixtures["bundle-pre28.json"]
	for _, f := range redTeam30Forgeries() {
		t.Run(f.name, func(t *testing.T) {
			matchStream(t, f.name, f.edit(t, bytes.Clone(pre28.data)), pre28.opts)
		})
	}
	v3 := fixtures["bundle-v3.json"]
	for i, s := range scanSeeds(t) {
		matchStream(t, "seed "+string(rune('a'+i)), s, v3.opts)
	}
}

// TestVerifyStream_TruncatedBundles: a valid bundle cut anywhere is refused, never taken and
// never a panic.
func TestVerifyStream_TruncatedBundles(t *testing.T) {
	f := streamFixtures(t)["bundle-pre28.json"]
	valid := bytes.TrimRight(f.data, " \n")
	for n := 0; n < len(valid); n += 1 + n/200 {
		_, _, err := streamed(t, valid[:n], f.opts)
		if err == nil {
			t.Fatalf("a bundle cut at %d of %d bytes parsed", n, len(valid))
		}
	}
}

// FuzzStream_MatchesStrict: whatever the input, the streaming verifier never panics, parses
// exactly what the strict reading parses, with the same values, and reports as Verify does,
// with its usual window and with one of a few bytes that moves inside every value.
func FuzzStream_MatchesStrict(f *testing.F) {
	for _, s := range scanSeeds(f) {
		f.Add(s)
	}
	opts := streamFixtures(f)["bundle-v3.json"].opts
	f.Fuzz(func(t *testing.T, data []byte) {
		matchStream(t, "fuzz", data, opts)
		defer func(w, f int) { streamWindow, streamFirstTry = w, f }(streamWindow, streamFirstTry)
		streamWindow, streamFirstTry = 5, 1
		matchStream(t, "fuzz, small window", data, opts)
	})
}

// TestVerifyStream_SmallWindows: with a window of a few bytes, which moves inside every
// string, number and separator of the bundle, the stream reads every fixture and forgery as
// the whole-file reading does.
func TestVerifyStream_SmallWindows(t *testing.T) {
	defer func(w, f int) { streamWindow, streamFirstTry = w, f }(streamWindow, streamFirstTry)
	for _, w := range []int{1, 7, 64} {
		streamWindow, streamFirstTry = w, 1
		fixtures := streamFixtures(t)
		for name, f := range fixtures {
			matchStream(t, name, f.data, f.opts)
		}
		pre28 := fixtures["bundle-pre28.json"]
		for _, f := range redTeam30Forgeries() {
			matchStream(t, f.name, f.edit(t, bytes.Clone(pre28.data)), pre28.opts)
		}
	}
}

// TestPathMemo_MatchesWalk: the memo's answer for each proof of a sequence, whole trees in
// order and proofs forged or out of order among them, is the walk's, error for error.
func TestPathMemo_MatchesWalk(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13, 64, 65, 100, 257} {
		var leaves [][]byte
		for i := range n {
			h := sha256.Sum256([]byte{0, byte(i), byte(i >> 8)})
			leaves = append(leaves, h[:])
		}
		root := mth(leaves)
		type step struct {
			index uint64
			leaf  []byte
			proof [][]byte
		}
		var steps []step
		for m := range n {
			steps = append(steps, step{uint64(m), leaves[m], path(m, leaves)})
		}
		forged := []step{}
		for m := 0; m < n; m += 1 + n/7 {
			p := clone2(path(m, leaves))
			if len(p) > 0 {
				p[len(p)-1] = leaves[m] // a wrong hash at the top
				forged = append(forged, step{uint64(m), leaves[m], p})
				forged = append(forged, step{uint64(m), leaves[m], p[:len(p)-1]})
			}
			forged = append(forged, step{uint64((m + 1) % n), leaves[m], path(m, leaves)})
			forged = append(forged, step{uint64(m), leaves[m], append(clone2(path(m, leaves)), root)})
		}
		// The whole tree in order, then with the forgeries spliced in at every seventh step,
		// then backwards.
		seqs := [][]step{steps}
		var mixed []step
		for i, s := range steps {
			mixed = append(mixed, s)
			if i%7 == 0 && len(forged) > 0 {
				mixed = append(mixed, forged[i%len(forged)])
			}
		}
		seqs = append(seqs, mixed, slices.Concat(forged, steps))
		back := slices.Clone(steps)
		slices.Reverse(back)
		seqs = append(seqs, back)
		for k, seq := range seqs {
			m, walk := newPathMemo(), newInclusionChecker()
			for i, s := range seq {
				want := walk.verify(s.index, uint64(n), s.leaf, s.proof, root)
				got := m.verify(s.index, uint64(n), s.leaf, s.proof, root)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("n=%d sequence %d step %d (index %d): memo %v, walk %v", n, k, i, s.index, got, want)
				}
			}
		}
	}
}

// TestCheckStreamable_AgreesWithTheReader: a bundle whose purged list is over the limit of one
// value is refused by the exporter's check, which names a --since whose export fits, and by
// the reader; the narrower bundle passes the check and is read.
func TestCheckStreamable_AgreesWithTheReader(t *testing.T) {
	defer func(prev int) { streamValueCap = prev }(streamValueCap)
	streamValueCap = 8 << 10
	f := streamFixtures(t)["bundle-v3.json"]
	b, err := ParseBundleBytes(f.data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		b.Purged = append(b.Purged, Purged{Entry: uint64(i / 2), Dispatch: fmt.Sprintf("d%d", i), Product: "patch",
			Digest: "sha256:" + strings.Repeat("ab", 32)})
	}
	err = CheckStreamable(b)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--since ") {
		t.Fatalf("CheckStreamable: %v, want ErrTooLarge naming a --since", err)
	}
	var since uint64
	if _, serr := fmt.Sscanf(err.Error()[strings.LastIndex(err.Error(), "--since "):], "--since %d", &since); serr != nil || since == 0 {
		t.Fatalf("no --since in %q", err)
	}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := streamed(t, buf.Bytes(), f.opts); !errors.Is(err, ErrBundle) {
		t.Fatalf("the reader took a bundle the exporter's check refuses: %v", err)
	}
	b.Purged = slices.DeleteFunc(b.Purged, func(p Purged) bool { return p.Entry < since })
	if err := CheckStreamable(b); err != nil {
		t.Fatalf("the export from --since %d: %v", since, err)
	}
	if b.Purged[0].Entry != since {
		t.Fatalf("the narrower export starts at purged entry %d, not %d", b.Purged[0].Entry, since)
	}
	buf.Reset()
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := streamed(t, buf.Bytes(), f.opts); err != nil {
		t.Fatalf("the reader refused a bundle the exporter's check passes: %v", err)
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r    *bytes.Reader
	read int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

// TestVerifyStream_MalformedValuesReadOnce: entries the scanner does not take (here an escaped
// key in every one, which the strict reading takes) are each read strictly from the window
// they are in: the reader does not grow its window to the end of the file for each, so the
// bytes it reads stay a small multiple of the file, not of the file times the entries.
func TestVerifyStream_MalformedValuesReadOnce(t *testing.T) {
	defer func(w, f int) { streamWindow, streamFirstTry = w, f }(streamWindow, streamFirstTry)
	streamWindow, streamFirstTry = 2<<10, 512
	f := streamFixtures(t)["bundle-pre28-mixed.json"]
	data := bytes.ReplaceAll(f.data, []byte(`"leaf_hash"`), []byte(`"leaf\u005fhash"`))
	if len(data) < 8*streamWindow {
		t.Fatalf("fixture: %d bytes, too few for the window to move", len(data))
	}
	matchStream(t, "escaped keys", data, f.opts)
	c := &countingReaderAt{r: bytes.NewReader(data)}
	rep, err := VerifyStream(context.Background(), c, int64(len(data)), f.opts)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	// Two passes (the fixture has fields after its entries) and the window's overlaps.
	if c.read > 3*int64(len(data)) {
		t.Fatalf("read %d bytes of a %d-byte bundle", c.read, len(data))
	}
}
