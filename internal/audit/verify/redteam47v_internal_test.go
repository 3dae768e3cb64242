package verify

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The streaming verifier (VerifyStream) against the whole-file one. Each test
// builds a bundle and holds the stream to the whole-file verdict: never OK where Verify fails
// or ParseBundleBytes refuses, never a panic, and reading no more than the bundle asks.

// rt47vFixture is bundle-v3.json (fields after its entries: two passes) and its key.
func rt47vFixture(t *testing.T) ([]byte, Options) {
	t.Helper()
	f := streamFixtures(t)["bundle-v3.json"]
	return bytes.Clone(f.data), f.opts
}

// rt47vWhole is the whole-file verdict: ok only when the bundle parses and verifies.
func rt47vWhole(data []byte, opts Options) (ok bool, why string) {
	b, err := ParseBundleBytes(data)
	if err != nil {
		return false, err.Error()
	}
	rep := Verify(b, opts)
	if !rep.OK {
		return false, rt47vFailed(rep)
	}
	return true, ""
}

// rt47vStream is the streamed verdict.
func rt47vStream(data []byte, opts Options) (ok bool, why string) {
	rep, err := VerifyStream(context.Background(), bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		return false, err.Error()
	}
	if !rep.OK {
		return false, rt47vFailed(rep)
	}
	return true, ""
}

func rt47vFailed(rep *Report) string {
	var s []string
	for _, c := range rep.Failed() {
		s = append(s, c.Check+" "+c.Item+": "+c.Detail)
	}
	return strings.Join(s, "; ")
}

// rt47vSame fails t when the stream's verdict on data is not the whole-file one, or when
// either passes a bundle wantOK says must fail.
func rt47vSame(t *testing.T, name string, data []byte, opts Options, wantOK bool) {
	t.Helper()
	wok, wwhy := rt47vWhole(data, opts)
	sok, swhy := rt47vStream(data, opts)
	if sok != wok {
		t.Fatalf("%s: stream ok=%v (%s), whole-file ok=%v (%s)", name, sok, swhy, wok, wwhy)
	}
	if sok != wantOK {
		t.Fatalf("%s: ok=%v, want %v (stream: %s; whole: %s)", name, sok, wantOK, swhy, wwhy)
	}
}

// TestRedTeam47V_ProofHashOfOtherLengthReused: a proof hash spelled as 44 base64 characters
// of 33 bytes (no padding) whose first 32 are the true sibling hash. The whole-file reading
// takes it as 33 bytes and the inclusion row fails. The stream's scanner keeps a copy of the
// last proof's hashes by position (proofHash) in 32-byte arrays: when the window cuts the
// entry after that hash (here a run of whitespace inside the entry, longer than the window),
// the entry is scanned again and the cached copy, cut to 32 bytes, is taken for the text:
// the stream read a value the bytes do not hold, and passed the altered bundle.
func TestRedTeam47V_ProofHashOfOtherLengthReused(t *testing.T) {
	data, opts := rt47vFixture(t)
	if ok, why := rt47vStream(data, opts); !ok {
		t.Fatalf("fixture does not verify streamed: %s", why)
	}
	const orig = `"U8XKeiMw7kyyaWp28QNtRLxUGXqoY4zeQ4QMJ/Hy3qE="`
	h, err := base64.StdEncoding.DecodeString(strings.Trim(orig, `"`))
	if err != nil || len(h) != HashSize || bytes.Count(data, []byte(orig)) != 1 {
		t.Fatalf("fixture: %v", err)
	}
	for _, tail := range []struct {
		name string
		text string // 44 characters of base64
	}{
		{"33 bytes", base64.StdEncoding.EncodeToString(append(bytes.Clone(h), 0x5a))},
		// 31 bytes: the 32nd of the cached copy is the previous hash's at that place, the
		// same hash here (the entry's first scan, cut, wrote all 32).
		{"31 bytes", base64.StdEncoding.EncodeToString(h[:31])},
	} {
		if len(tail.text) != 44 {
			t.Fatalf("%s: %d characters", tail.name, len(tail.text))
		}
		// Spaces inside the entry, after the hash: more than the window, which cuts the entry
		// there.
		pad := strings.Repeat(" ", 2*streamWindow)
		forged := bytes.Replace(data, []byte(orig), []byte(`"`+tail.text+`"`+pad), 1)
		rt47vSame(t, tail.name, forged, opts, false)
		// Without the spaces the window never cuts the entry: the stream read it once.
		rt47vSame(t, tail.name+", no cut", bytes.Replace(data, []byte(orig), []byte(`"`+tail.text+`"`), 1), opts, false)
	}
	_ = errors.Is
}

// rt47vSwap serves a until as many bytes as a holds have been read through it (the stream's
// first pass reads the whole file), then b: a file rewritten while verify reads it.
type rt47vSwap struct {
	a, b []byte
	read int
}

func (s *rt47vSwap) ReadAt(p []byte, off int64) (int, error) {
	src := s.a
	if s.read >= len(s.a) {
		src = s.b
	}
	n, err := bytes.NewReader(src).ReadAt(p, off)
	s.read += n
	return n, err
}

// TestRedTeam47V_SecondPassReadsOtherBytes: bundle-v3.json has fields after its entries, so
// the stream reads it twice. Between the two passes the file becomes a forgery of the same
// size: its selection_note (after the entries) altered, which the whole-file verifier
// refuses. The second pass read only the entries, so the verdict was the first pass's fields'
// and the second pass's entries': OK for a file that, when verify returned, was the forgery.
// The second pass reads the whole bundle again and refuses one whose fields are not, byte for
// byte, those of the first.
func TestRedTeam47V_SecondPassReadsOtherBytes(t *testing.T) {
	valid, opts := rt47vFixture(t)
	i := bytes.Index(valid, []byte(`"selection_note": "`))
	if i < 0 || i < bytes.Index(valid, []byte(`"entries"`)) {
		t.Fatal("fixture: no selection_note after the entries")
	}
	forged := bytes.Clone(valid)
	at := i + len(`"selection_note": "`) + 40
	forged[at] ^= 'A' ^ 'B' // one base64 character of the signed text
	if forged[at] == valid[at] {
		t.Fatal("no change")
	}
	if ok, _ := rt47vWhole(forged, opts); ok {
		t.Fatal("the whole-file verifier passes the forgery")
	}
	if ok, _ := rt47vStream(valid, opts); !ok {
		t.Fatal("fixture does not verify streamed")
	}
	for _, c := range []struct {
		name string
		a, b []byte
	}{{"valid then forged", valid, forged}, {"forged then valid", forged, valid}} {
		rep, err := VerifyStream(context.Background(), &rt47vSwap{a: c.a, b: c.b}, int64(len(valid)), opts)
		if err == nil && rep.OK {
			t.Fatalf("%s: the stream passed a file that changed between its two passes", c.name)
		}
		if err != nil && !errors.Is(err, ErrBundle) {
			t.Fatalf("%s: %v, want an ErrBundle", c.name, err)
		}
	}
}

// TestRedTeam47V_DenseFieldParsedBeforeDensity: a purged list of a quarter million empty objects (0.8 MB
// of "{},") before the entries. The whole-file reading refuses the bundle for its density
// before parsing any of it; the stream counted the objects as it read but applied the rule
// only at the end, after unmarshalling the list into 256k Purged values (over 80 MB allocated, and its
// 64 MiB limit allows ~20 million: over a gigabyte per field). The stream refuses the bundle
// as soon as what it has read breaks the rule, which it can, knowing the file's size.
func TestRedTeam47V_DenseFieldParsedBeforeDensity(t *testing.T) {
	data, opts := rt47vFixture(t)
	const n = 1 << 18
	list := "[" + strings.Repeat("{},", n-1) + "{}]"
	forged := bytes.Replace(data, []byte(` "entries": [`), []byte(` "purged": `+list+",\n \"entries\": ["), 1)
	if len(forged) == len(data) {
		t.Fatal("fixture: no entries")
	}
	if _, err := ParseBundleBytes(forged); err == nil || !strings.Contains(err.Error(), "objects and lists") {
		t.Fatalf("whole-file: %v, want the density refusal", err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := VerifyStream(context.Background(), bytes.NewReader(forged), int64(len(forged)), opts)
	runtime.ReadMemStats(&after)
	if err == nil || !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "objects and lists") {
		t.Fatalf("stream: %v, want the density refusal", err)
	}
	// The file, its window and a copy of the list's bytes are a few times 0.8 MB; parsing the
	// list allocates over 80 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 24<<20 {
		t.Fatalf("the stream allocated %d MB refusing a %d-byte bundle for its density", got>>20, len(forged))
	}
}

// rt47vEntries splits bundle-v3.json's entries array: the text before its first entry, each
// entry's text, and the text after its last.
func rt47vEntries(t *testing.T, data []byte) (head []byte, es [][]byte, tail []byte) {
	t.Helper()
	start := bytes.Index(data, []byte(` "entries": [`)) + len(` "entries": [`)
	end := bytes.Index(data, []byte("\n ],\n \"anchored\""))
	if start < len(` "entries": [`) || end < start {
		t.Fatal("fixture: entries not found")
	}
	for _, part := range strings.Split(string(data[start:end]), "\n  },") {
		part = strings.TrimSuffix(part, "\n  }")
		es = append(es, []byte(part+"\n  }"))
	}
	if len(es) != 2 {
		t.Fatalf("fixture: %d entries", len(es))
	}
	return data[:start], es, data[end:]
}

func rt47vJoin(head []byte, es [][]byte, tail []byte) []byte {
	return slices.Concat(head, bytes.Join(es, []byte(",")), tail)
}

// TestRedTeam47V_EntryListForgeries: the entries duplicated (the same index twice, one copy
// altered, the purged row reading which copy verified), reordered, one entry's leaf and proof
// under another's index (the path memo holding the last proof), entries or checkpoint twice
// (once on each side of the entries, or spelled with an escape), and fields moved before the
// entries (one pass) fail or pass streamed as whole, with the usual window and with one of a
// few bytes. Held.
func TestRedTeam47V_EntryListForgeries(t *testing.T) {
	data, opts := rt47vFixture(t)
	head, es, tail := rt47vEntries(t, data)
	if !bytes.Equal(rt47vJoin(head, es, tail), data) {
		t.Fatal("fixture: the split does not join back")
	}
	e1, e2 := es[0], es[1]
	alter := func(e []byte) []byte { // one character of the entry's bytes
		i := bytes.Index(e, []byte(`"entry": "`)) + len(`"entry": "`) + 20
		out := bytes.Clone(e)
		out[i] ^= 'a' ^ 'b'
		return out
	}
	reindex := func(e []byte, from, to string) []byte {
		return bytes.Replace(e, []byte(`"index": `+from+`,`), []byte(`"index": `+to+`,`), 1)
	}
	cp := rt46cQuoted(t, data, "checkpoint")
	anchoredAt := bytes.Index(data, []byte(` "anchored": {`))
	rest := data[anchoredAt : len(data)-len("}\n")] // every field after the entries
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"as is", data, true},
		{"entry 1 twice", rt47vJoin(head, [][]byte{e1, e1, e2}, tail), false},
		{"entry 2 twice", rt47vJoin(head, [][]byte{e1, e2, e2}, tail), false},
		{"entry 1 twice, the first altered", rt47vJoin(head, [][]byte{alter(e1), e1, e2}, tail), false},
		{"entry 1 twice, the second altered", rt47vJoin(head, [][]byte{e1, alter(e1), e2}, tail), false},
		{"entry 1 replaced by entry 2", rt47vJoin(head, [][]byte{e2, e2}, tail), false},
		{"reordered", rt47vJoin(head, [][]byte{e2, e1}, tail), false},
		{"entry 1 only", rt47vJoin(head, [][]byte{e1}, tail), false},
		{"entry 2's leaf and proof at index 1", rt47vJoin(head, [][]byte{reindex(e2, "2", "1"), e2}, tail), false},
		{"entry 1's leaf and proof at index 2", rt47vJoin(head, [][]byte{e1, reindex(e1, "1", "2")}, tail), false},
		{"checkpoint twice, after the entries too", bytes.Replace(data, []byte(` "anchored": {`), []byte(` "checkpoint": `+cp+",\n \"anchored\": {"), 1), false},
		{"entries twice", bytes.Replace(data, []byte(` "anchored": {`), []byte(` "entries": [],`+"\n"+` "anchored": {`), 1), false},
		{"entries twice, escaped", bytes.Replace(data, []byte(` "anchored": {`), []byte(` "entr\u0069es": [],`+"\n"+` "anchored": {`), 1), false},
		{"checkpoint twice, escaped", bytes.Replace(data, []byte(` "anchored": {`), []byte(` "\u0063heckpoint": `+cp+",\n \"anchored\": {"), 1), false},
		{"entries not a list", rt47vJoin(head[:len(head)-1], [][]byte{[]byte(`{"index": 1}`)}, tail[1:]), false},
		{"every field before the entries", slices.Concat(data[:bytes.Index(data, []byte(` "entries": [`))], rest, []byte(",\n"),
			data[bytes.Index(data, []byte(` "entries": [`)):anchoredAt-len(",\n")], []byte("\n}\n")), true},
	}
	defer func(w, f int) { streamWindow, streamFirstTry = w, f }(streamWindow, streamFirstTry)
	for _, w := range [][2]int{{streamWindow, streamFirstTry}, {7, 1}} {
		streamWindow, streamFirstTry = w[0], w[1]
		for _, c := range cases {
			rt47vSame(t, fmt.Sprintf("%s (window %d)", c.name, w[0]), c.data, opts, c.ok)
		}
	}
}

// TestRedTeam47V_CheckStreamableAtItsLimit: with the reader's limit of one value set to the
// largest size CheckStreamable computes for the bundle (its estimate of an entry, or a field's
// indented size), the check passes the bundle and the reader takes every value of it as
// WriteBundle writes it: the exporter writes no bundle verify refuses. One byte lower, the
// check refuses it. Held.
func TestRedTeam47V_CheckStreamableAtItsLimit(t *testing.T) {
	data, opts := rt47vFixture(t)
	b, err := ParseBundleBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	// A large entry: its bytes are the bundle's, so only its size matters to the reader.
	b.Entries[0].Entry = append(bytes.Clone(b.Entries[0].Entry), bytes.Repeat([]byte(" "), 5000)...)
	limit := 0
	for _, v := range []any{b.Selection, b.Checkpoint, b.Anchored, b.Manifests, b.SelectionNote, b.Purged, b.PurgedRuns} {
		n, err := indentedSize(v)
		if err != nil {
			t.Fatal(err)
		}
		limit = max(limit, n)
	}
	for _, e := range b.Entries {
		n := base64.StdEncoding.EncodedLen(len(e.Entry)) + base64.StdEncoding.EncodedLen(len(e.LeafHash)) +
			len(e.InclusionProof)*(base64.StdEncoding.EncodedLen(HashSize)+8) + 256
		limit = max(limit, n)
	}
	defer func(prev int) { streamValueCap = prev }(streamValueCap)
	streamValueCap = limit
	if err := CheckStreamable(b); err != nil {
		t.Fatalf("CheckStreamable at its own limit: %v", err)
	}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyStream(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len()), opts); err != nil {
		t.Fatalf("the reader refused a bundle CheckStreamable passes: %v", err)
	}
	streamValueCap = limit - 1
	if err := CheckStreamable(b); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("CheckStreamable one byte under: %v", err)
	}
}

// TestRedTeam47V_HostileFieldValues: deeply nested values, huge numbers and long escaped keys
// in the fields around the entries are refused streamed as whole, quickly and without a
// panic. Held.
func TestRedTeam47V_HostileFieldValues(t *testing.T) {
	data, opts := rt47vFixture(t)
	at := []byte(` "anchored": {`)
	deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
	for _, c := range []struct{ name, field string }{
		{"deep purged list after the entries", ` "purged": ` + deep + ",\n"},
		{"deep unknown field", ` "x": ` + deep + ",\n"},
		{"huge number", ` "purged": [{"entry": 1e400, "dispatch": "d", "product": "patch", "digest": "x"}],` + "\n"},
		{"index past uint64", ` "purged": [{"entry": 18446744073709551616, "dispatch": "d", "product": "patch", "digest": "x"}],` + "\n"},
		{"long escaped key", ` "` + strings.Repeat(`\u0061`, 100000) + `": 1,` + "\n"},
		{"purged twice (before and after)", ` "purged": [],` + "\n"},
	} {
		forged := bytes.Replace(data, at, append([]byte(c.field), at...), 1)
		if c.name == "purged twice (before and after)" {
			forged = bytes.Replace(forged, []byte(` "entries": [`), []byte(` "purged": [],`+"\n"+` "entries": [`), 1)
		}
		rt47vSame(t, c.name, forged, opts, false)
	}
}

// TestRedTeam47V_DenseFieldInSparseFile: the density rule is the file's: a purged list of
// 400k empty objects (1.2 MB) in a file padded with 30 MB of whitespace keeps to it, and the
// stream (which takes files of any size) unmarshalled the list into 400k values, over 100 MB
// allocated for 1.2 MB of field; its 64 MiB limit of one value allowed some 20 million, 7 GB
// a field. The stream holds each large value to the rule on its own: no bundle agora writes
// has a field denser than it.
func TestRedTeam47V_DenseFieldInSparseFile(t *testing.T) {
	data, opts := rt47vFixture(t)
	const n = 400_000
	list := "[" + strings.Repeat("{},", n-1) + "{}]"
	pad := strings.Repeat(" ", 30<<20)
	forged := bytes.Replace(data, []byte(` "entries": [`), []byte(` "purged": `+list+",\n"+pad+` "entries": [`), 1)
	if nodes := bytes.Count(forged, []byte("{")) + bytes.Count(forged, []byte("[")); nodes > len(forged)/minBytesPerNode {
		t.Fatalf("fixture: %d nodes in %d bytes break the file's rule", nodes, len(forged))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := VerifyStream(context.Background(), bytes.NewReader(forged), int64(len(forged)), opts)
	runtime.ReadMemStats(&after)
	if err == nil && rep.OK {
		t.Fatal("the stream passed a bundle with a purged list of empty objects")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
		t.Fatalf("the stream allocated %d MB for a %d-byte field of %d empty objects", got>>20, len(list), n)
	}
}

// TestRedTeam47V_DenseEntryInSparseFile: as TestRedTeam47V_DenseFieldInSparseFile, the dense
// value an entry: its inclusion proof 400k empty lists, which the scanner does not take and
// the strict reading refuses at the first (a byte string is base64, never a list), before
// it allocates for the rest. Held.
func TestRedTeam47V_DenseEntryInSparseFile(t *testing.T) {
	data, opts := rt47vFixture(t)
	const n = 400_000
	pad := strings.Repeat(" ", 30<<20)
	forged := bytes.Replace(data, []byte(`"inclusion_proof": [`+"\n    \"U8XK"), []byte(`"inclusion_proof": [`+strings.Repeat("[],", n)+"\n    \"U8XK"), 1)
	forged = bytes.Replace(forged, []byte(` "anchored": {`), []byte(pad+` "anchored": {`), 1)
	if nodes := bytes.Count(forged, []byte("{")) + bytes.Count(forged, []byte("[")); nodes > len(forged)/minBytesPerNode {
		t.Fatalf("fixture: %d nodes in %d bytes break the file's rule", nodes, len(forged))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := VerifyStream(context.Background(), bytes.NewReader(forged), int64(len(forged)), opts)
	runtime.ReadMemStats(&after)
	if err == nil && rep.OK {
		t.Fatal("the stream passed a bundle with a forged entry")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
		t.Fatalf("the stream allocated %d MB for an entry of %d empty lists (%v)", got>>20, n, err)
	}
}
