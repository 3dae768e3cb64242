package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/strictjson"
)

// MaxStreamValue caps one value the streaming reader holds at once: an entry, or one of the
// bundle's other fields (its selection, checkpoint, anchored checkpoint and evidence,
// manifests, purged lists). Everything else of a bundle streams past, so this and the entries'
// count decide nothing about its size. The exporter refuses a bundle with a larger field
// ([CheckStreamable]), so it writes none that verify refuses.
const MaxStreamValue = 64 << 20

// streamValueCap is MaxStreamValue, a variable only so the package's tests can hold the
// exporter's check and the reader to one limit without writing 64 MiB fields.
var streamValueCap = MaxStreamValue

// ErrRunBundle is returned by [VerifyStream] for a run bundle (`agora orch audit`), which is
// read whole ([ParseRunBundle]).
var ErrRunBundle = errors.New("a run bundle, which is read whole, not streamed")

// streamState is what the streaming verifier keeps of the entries it has checked: a few
// counters and hashes, whatever the bundle's size.
type streamState struct {
	list    *entryList
	indexes hash.Hash // IndexesDigest's hash, fed one index at a time
	paths   *pathMemo

	passedEntries, passedInclusions int

	// ancSize is the anchored checkpoint's size when it verifies (hasAnc); firstUncovered is
	// the first entry at or past it (uncovered).
	hasAnc         bool
	ancSize        uint64
	uncovered      bool
	firstUncovered uint64

	// refs says whether entries' details.manifest are collected: only when the bundle carries
	// manifests or is a part of a run, as checkManifests reads them only then.
	refs bool

	// holds records, for purgedKind and purgedRunKind, whether any entry may be of that kind.
	holds map[string]bool
	// purged and purgedRuns are what the verified entries record ([PurgedOf], [PurgedRunsOf]
	// of the verified entries), cut at the first error.
	purged        []Purged
	purgedErr     error
	purgedRuns    []PurgedRun
	purgedRunsErr error

	// headRows is how many rows the report held when the entries began.
	headRows int
}

func newStreamState(b *Bundle) *streamState {
	return &streamState{list: newEntryList(b), indexes: sha256.New(), paths: newPathMemo(),
		refs: len(b.Manifests) > 0 || b.Selection.Run != "", holds: map[string]bool{}}
}

func (s *streamState) indexesDigest() string {
	return "sha256:" + hex.EncodeToString(s.indexes.Sum(nil))
}

// streamEntry checks one entry as [verifier.checkEntries] does, keeping only the summaries
// the later rows read.
func (v *verifier) streamEntry(e Entry) {
	st := v.stream
	st.list.add(e.Index)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], e.Index)
	st.indexes.Write(buf[:])
	if st.hasAnc && !st.uncovered && e.Index >= st.ancSize {
		st.uncovered, st.firstUncovered = true, e.Index
	}
	holdsPurged, holdsRuns := bytes.Contains(e.Entry, purgedKind), bytes.Contains(e.Entry, purgedRunKind)
	if holdsPurged {
		st.holds[string(purgedKind)] = true
	}
	if holdsRuns {
		st.holds[string(purgedRunKind)] = true
	}
	// The item names only failed rows: it is written into them afterwards, not made for
	// every entry.
	fails, rows := v.entryFails, len(v.rep.Checks)
	v.checkEntry(e, "")
	v.checkInclusion(e, "")
	if v.entryFails != fails {
		item := strconv.FormatUint(e.Index, 10)
		for i := rows; i < len(v.rep.Checks); i++ {
			v.rep.Checks[i].Item = item
		}
		return // not verified: the purged rows read only verified entries
	}
	if holdsPurged && st.purgedErr == nil {
		st.purgedErr = entryOfKind(e, entry.RetentionPurged, purgedKind, func(idx uint64, f EntryFields) error {
			ps, err := purgedIn(idx, f)
			st.purged = append(st.purged, ps...)
			return err
		})
		if st.purgedErr != nil {
			st.purged = nil
		}
	}
	if holdsRuns && st.purgedRunsErr == nil {
		var runs []PurgedRun
		runs, st.purgedRunsErr = PurgedRunsOf([]Entry{e})
		st.purgedRuns = append(st.purgedRuns, runs...)
		if st.purgedRunsErr != nil {
			st.purgedRuns = nil
		}
	}
}

// VerifyStream reads and checks the bundle of size bytes in r as [ParseBundle] and [Verify]
// do, holding at most a few values of it at once ([MaxStreamValue]) and O(log n) state, so its
// memory does not grow with the bundle. The exporter writes every field before the entries,
// which are then checked as they are read, in one pass; a bundle with a field after its
// entries is read twice, its entries checked on the second pass. It parses exactly what
// ParseBundle parses, with the same values (FuzzStream_MatchesStrict), though the error for
// a malformed bundle may be worded differently; such errors match [ErrBundle], and a run
// bundle gives [ErrRunBundle].
//
// The report is Verify's but for passing entry and inclusion rows: a bundle of millions of
// entries would hold and print millions of them, so each kind is one row that counts them.
// Failed rows are listed as Verify lists them.
func VerifyStream(ctx context.Context, r io.ReaderAt, size int64, opts Options) (*Report, error) {
	rep, _, err := verifyStream(ctx, r, size, opts, nil)
	return rep, err
}

// streamHook sees what the streaming reader reads, for the tests that hold it to the strict
// reading: start when it begins a pass over the entries, entry for each entry (whose bytes
// are valid only during the call).
type streamHook struct {
	start func()
	entry func(Entry)
}

// verifyStream is [VerifyStream] that also returns the bundle's fields (all but its entries)
// and calls hook, when not nil, as it reads.
func verifyStream(ctx context.Context, r io.ReaderAt, size int64, opts Options, hook *streamHook) (*Report, *Bundle, error) {
	sr := newStreamReader(ctx, r, size)
	sr.hook = hook
	b, v, err := sr.document(opts, nil)
	if err != nil {
		if errors.Is(err, ErrBundle) {
			if derr := sr.densityRest(); derr != nil {
				return nil, nil, derr
			}
		}
		return nil, nil, err
	}
	if err := sr.density(); err != nil {
		return nil, nil, err
	}
	if _, err := b.checkShape(); err != nil {
		return nil, nil, err
	}
	if v == nil {
		// A field came after the entries: read the bundle again, checking its entries against
		// every field of the first reading. The second reading is whole and must find those
		// fields byte for byte where the first found them, so the verdict is of one reading
		// of the file, every byte of it checked: a file that changed between the two (its
		// fields, or the entries' place) is refused, not verified half from each.
		sr2 := newStreamReader(ctx, r, size)
		sr2.hook = hook
		_, v2, err := sr2.document(opts, b)
		if err != nil {
			return nil, nil, err
		}
		if v2 == nil || !bytes.Equal(sr2.fields.Sum(nil), sr.fields.Sum(nil)) {
			return nil, nil, fmt.Errorf("%w: the bundle changed while it was read: its second reading differs from its first", ErrBundle)
		}
		v = v2
	}
	return v.finishStream(), b, nil
}

// startStream runs the rows before the entries and readies v to take them.
func (v *verifier) startStream() {
	v.stream = newStreamState(v.b)
	v.checkKey()
	v.checkCheckpoint()
	if a := v.b.Anchored; a != nil && v.key != nil {
		if c, err := OpenCheckpoint(a.Checkpoint, v.key, v.b.Origin); err == nil {
			v.stream.hasAnc, v.stream.ancSize = true, c.Size
		}
	}
}

// finishStream puts the rows in Verify's order (the selection and entries rows, which need
// every entry, before the entries' own) and runs the rest.
func (v *verifier) finishStream() *Report {
	entryRows := v.rep.Checks[v.stream.headRows:]
	entryRows = append([]Result(nil), entryRows...)
	v.rep.Checks = v.rep.Checks[:v.stream.headRows]
	v.checkSelection()
	v.checkEntryList()
	v.rep.Checks = append(v.rep.Checks, entryRows...)
	st := v.stream
	if st.passedEntries > 0 {
		v.pass(CheckEntry, "", "%d entries: each entry's leaf hash, canonical form, seq, kind and subject checked (passing rows counted, not listed, in a streamed bundle)", st.passedEntries)
	}
	if st.passedInclusions > 0 {
		v.pass(CheckInclusion, "", "%d entries in the tree of size %d", st.passedInclusions, v.cp.Size)
	}
	v.countOmittedFails()
	v.checkAnchored()
	v.checkManifests()
	v.checkPurged()
	v.checkPurgedRuns()
	v.rep.OK = len(v.rep.Failed()) == 0
	v.rep.Tier = TierNone
	if v.rep.OK {
		v.rep.Tier = tierOf(v)
	}
	return v.rep
}

// streamWindow is how much of the file the reader asks for at a time, and streamFirstTry how
// much of it a value is first parsed from. Variables only so the package's tests can move the
// window at every byte of small bundles.
var (
	streamWindow   = 1 << 20
	streamFirstTry = 64 << 10
)

// streamReader reads a bundle's JSON from a file through a window, with the scanner of
// [scanBundle] over the window's bytes.
type streamReader struct {
	ctx  context.Context
	r    io.ReaderAt
	size int64
	off  int64 // the file offset of s.b[0]
	s    scanner
	// nodes counts the '{' and '[' of the bytes read up to counted, for checkDensity's rule.
	nodes   int
	counted int64
	readErr error
	// entriesAt is the offset of the entries' '['.
	entriesAt int64
	// fields hashes every member but the entries (key and bytes) and the entries' offset, in
	// order: the two readings of a bundle read twice must agree on it.
	fields hash.Hash
	hook   *streamHook
}

func newStreamReader(ctx context.Context, r io.ReaderAt, size int64) *streamReader {
	sr := &streamReader{ctx: ctx, r: r, size: size}
	sr.s.stream = true
	sr.s.b = make([]byte, 0, streamWindow)
	return sr
}

func (sr *streamReader) pos() int64 { return sr.off + int64(sr.s.i) }

func (sr *streamReader) atEOF() bool { return sr.off+int64(len(sr.s.b)) >= sr.size }

// ensure makes the window hold n bytes from the current position, or every byte to the end
// of the file, and reports whether it holds n. The window slides and grows as needed, up to
// MaxStreamValue plus one read.
func (sr *streamReader) ensure(n int) bool {
	s := &sr.s
	if s.i+n <= len(s.b) {
		return true
	}
	if sr.readErr != nil || sr.atEOF() {
		return false
	}
	if err := sr.ctx.Err(); err != nil {
		sr.readErr = err
		return false
	}
	// Slide what is left to the front, in a larger buffer when it would not fit.
	want := max(n, streamWindow)
	buf := s.b[:0]
	if cap(s.b) < want {
		buf = make([]byte, 0, want)
	}
	buf = append(buf, s.b[s.i:]...) // copy: the two may overlap; append copies forward, as memmove does
	sr.off += int64(s.i)
	s.b, s.i = buf, 0
	for len(s.b) < cap(s.b) && !sr.atEOF() {
		end := min(int64(cap(s.b)-len(s.b)), sr.size-sr.off-int64(len(s.b)))
		k, err := sr.r.ReadAt(s.b[len(s.b):len(s.b)+int(end)], sr.off+int64(len(s.b)))
		from := sr.off + int64(len(s.b))
		s.b = s.b[:len(s.b)+k]
		if to := sr.off + int64(len(s.b)); to > sr.counted && from <= sr.counted {
			fresh := s.b[len(s.b)-int(to-sr.counted):]
			sr.nodes += bytes.Count(fresh, []byte{'{'}) + bytes.Count(fresh, []byte{'['})
			sr.counted = to
		}
		if err != nil && !(errors.Is(err, io.EOF) && sr.atEOF()) {
			sr.readErr = fmt.Errorf("read audit bundle: %w", err)
			return false
		}
		if k == 0 {
			sr.readErr = fmt.Errorf("read audit bundle: %w", io.ErrUnexpectedEOF)
			return false
		}
	}
	return s.i+n <= len(s.b)
}

// try runs parse at the current position with more and more of the file in the window while
// it fails at the window's end (cut), until it succeeds, fails inside the window, or fails with
// everything to the end of the file (or streamValueCap) in it. parse must read only the
// window. A value may only fail cut when more bytes could complete it: growing the window
// only for those keeps a malformed value from costing a read of streamValueCap.
func (sr *streamReader) try(parse func() (ok, cut bool)) bool {
	n := min(streamFirstTry, streamValueCap)
	for {
		sr.ensure(n)
		start := sr.s.i
		ok, cut := parse()
		if ok {
			// The window may hold more than n: a value over the cap is refused whatever the
			// window held, so the reader takes exactly what CheckStreamable passes.
			if sr.s.i-start <= streamValueCap {
				return true
			}
			sr.s.i = start
			return false
		}
		sr.s.i = start
		if !cut || sr.readErr != nil || sr.atEOF() || n >= streamValueCap {
			return false
		}
		n = min(2*n, streamValueCap)
	}
}

// fail is the error for a bundle the reader cannot take at the current position.
func (sr *streamReader) fail(what string) error {
	if sr.readErr != nil {
		return sr.readErr
	}
	return fmt.Errorf("%w: at byte %d: %s", ErrBundle, sr.pos(), what)
}

// ws skips whitespace, across windows.
func (sr *streamReader) ws() {
	for {
		sr.s.ws()
		if sr.s.i < len(sr.s.b) || !sr.ensure(1) {
			return
		}
	}
}

func (sr *streamReader) eat(c byte) bool {
	sr.ws()
	return sr.ensure(1) && sr.s.eat(c)
}

// rawValue returns the bytes of the JSON value at the current position (at most
// MaxStreamValue of them), valid until the window moves.
func (sr *streamReader) rawValue() ([]byte, error) {
	sr.ws()
	var raw []byte
	if !sr.try(func() (ok, cut bool) {
		s := &sr.s
		dec := json.NewDecoder(bytes.NewReader(s.b[s.i:]))
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return false, errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
		}
		s.i += int(dec.InputOffset())
		raw = m
		// A number or literal ends at the byte after it, which the window must hold: one
		// that ends with the window may go on past it.
		if s.i == len(s.b) && !sr.atEOF() {
			return false, true
		}
		return true, false
	}) {
		return nil, sr.fail(fmt.Sprintf("not a JSON value of at most %d bytes", streamValueCap))
	}
	return raw, nil
}

// key reads an object key as strictjson reads it (escapes and all).
func (sr *streamReader) key() (string, error) {
	sr.ws()
	var k []byte
	if sr.try(func() (ok, cut bool) {
		k, ok = sr.s.plainString()
		return ok, !ok && sr.s.i >= len(sr.s.b)
	}) {
		return string(k), nil
	}
	raw, err := sr.rawValue()
	if err != nil {
		return "", err
	}
	var key string
	if err := strictjson.Unmarshal(raw, &key); err != nil {
		return "", sr.fail(fmt.Sprintf("object key: %v", err))
	}
	return key, nil
}

// document reads the bundle's top-level object. At its entries it checks them as it reads
// them, with a verifier of the fields before; v is that verifier, or nil when a field
// follows the entries (then the caller checks them again with every field known).
//
// known, when not nil, is the bundle's fields from a first reading: the entries are checked
// against it, and v is kept whatever follows them.
func (sr *streamReader) document(opts Options, known *Bundle) (b *Bundle, v *verifier, err error) {
	b = new(Bundle)
	on := b // the fields the entries are checked against
	if known != nil {
		on = known
	}
	sr.fields = sha256.New()
	if !sr.eat('{') {
		return nil, nil, sr.fail("a bundle is a JSON object")
	}
	seen := map[string]bool{}
	entriesSeen := false
	for first := true; ; first = false {
		if sr.eat('}') {
			break
		}
		if !first && !sr.eat(',') {
			return nil, nil, sr.fail("want ',' or '}' after an object member")
		}
		key, err := sr.key()
		if err != nil {
			return nil, nil, err
		}
		if seen[key] {
			return nil, nil, sr.fail(fmt.Sprintf("key %q twice", truncate(key, 40)))
		}
		seen[key] = true
		if !sr.eat(':') {
			return nil, nil, sr.fail("want ':' after an object key")
		}
		if entriesSeen && known == nil {
			v = nil // a field after the entries: they were checked without it
		}
		if key == "entries" {
			entriesSeen = true
			sr.ws()
			sr.entriesAt = sr.pos()
			fmt.Fprintf(sr.fields, "entries at %d\n", sr.entriesAt)
			if v, err = sr.verifyEntries(on, opts); err != nil {
				return nil, nil, err
			}
			continue
		}
		target := bundleField(b, key)
		if target == nil {
			if b.Format == RunFormat || b.Format == RunFormatV1 {
				return nil, nil, ErrRunBundle
			}
			return nil, nil, sr.fail(fmt.Sprintf("unknown field %q", truncate(key, 40)))
		}
		raw, err := sr.rawValue()
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(sr.fields, "%d %q %d\n", len(key), key, len(raw))
		sr.fields.Write(raw)
		// The file's size is known: a value is not parsed once what was read of the file
		// already breaks checkDensity's rule, as the whole-file reading parses none of it.
		if err := sr.density(); err != nil {
			return nil, nil, err
		}
		if err := valueDensity(key, raw); err != nil {
			return nil, nil, err
		}
		if err := strictjson.Unmarshal(raw, target); err != nil {
			return nil, nil, fmt.Errorf("%w: field %q: %v", ErrBundle, key, err)
		}
	}
	sr.ws()
	if !sr.atEOF() || sr.s.i != len(sr.s.b) {
		return nil, nil, sr.fail("something after the bundle's object")
	}
	if !entriesSeen {
		return b, nil, nil // checkShape refuses it
	}
	return b, v, nil
}

// verifyEntries reads the entries array at the current position and checks each entry with a
// verifier of b as it stands. A null instead of the array leaves b.Entries nil, which
// checkShape refuses.
func (sr *streamReader) verifyEntries(b *Bundle, opts Options) (*verifier, error) {
	sr.ws()
	if !sr.ensure(1) || sr.s.b[sr.s.i] != '[' {
		raw, err := sr.rawValue()
		if err != nil {
			return nil, err
		}
		var es []Entry
		if err := strictjson.Unmarshal(raw, &es); err != nil {
			return nil, fmt.Errorf("%w: field \"entries\": %v", ErrBundle, err)
		}
		if es != nil {
			return nil, sr.fail("entries must be a list")
		}
		b.Entries = nil
		return nil, nil
	}
	sr.s.i++
	b.Entries = []Entry{} // a list: the entries themselves stream past
	v := newVerifier(b, opts)
	v.startStream()
	v.stream.headRows = len(v.rep.Checks)
	if sr.hook != nil {
		sr.hook.start()
	}
	if sr.eat(']') {
		return v, nil
	}
	for {
		if err := sr.ctx.Err(); err != nil {
			return nil, err
		}
		e, err := sr.entry()
		if err != nil {
			return nil, err
		}
		if sr.nodes > int(sr.size)/minBytesPerNode+frameNodes {
			return nil, sr.density() // refused now, not after checking every entry of the file
		}
		if sr.hook != nil {
			sr.hook.entry(e)
		}
		v.streamEntry(e)
		if sr.eat(']') {
			return v, nil
		}
		if !sr.eat(',') {
			return nil, sr.fail("want ',' or ']' after an entry")
		}
	}
}

// entry reads one entry: by the scanner when it takes it, otherwise strictly by itself, as
// the strict reading of the whole bundle reads it. Its byte strings are valid until the next.
func (sr *streamReader) entry() (Entry, error) {
	sr.ws()
	sr.s.slab, sr.s.proofs = sr.s.slab[:0], sr.s.proofs[:0]
	sr.ensure(min(streamFirstTry, streamValueCap))
	start := sr.s.i
	if e, ok := sr.s.entry(); ok && sr.s.i-start <= streamValueCap {
		return e, nil
	}
	// The scanner does not say whether the window cut the entry: the JSON decoder does. Once
	// the whole entry is in the window, the scanner has it again, and what it does not take
	// is read strictly.
	sr.s.i = start
	raw, err := sr.rawValue()
	if err != nil {
		return Entry{}, err
	}
	end := sr.s.i
	sr.s.i -= len(raw)
	if e, ok := sr.s.entry(); ok && sr.s.i == end {
		return e, nil
	}
	sr.s.i = end
	e := Entry{}
	if err := strictjson.Unmarshal(raw, &e); err != nil {
		return e, fmt.Errorf("%w: entry at byte %d: %v", ErrBundle, sr.pos()-int64(len(raw)), err)
	}
	return e, nil
}

// density applies checkDensity's rule to the counts of the whole file.
func (sr *streamReader) density() error {
	if sr.nodes > int(sr.size)/minBytesPerNode+frameNodes {
		return fmt.Errorf("%w: %d objects and lists in %d bytes, more than one per %d bytes, which no bundle agora writes holds (refused before parsing: reading it would take far more memory than the file)",
			ErrBundle, sr.nodes, sr.size, minBytesPerNode)
	}
	return nil
}

// denseValueFrom is the size from which one value is held to checkDensity's rule on its own.
const denseValueFrom = 1 << 20

// valueDensity refuses a value of at least denseValueFrom bytes with more objects and lists
// than checkDensity allows its bytes. The file's rule does not bound one value of a file of
// any size (a dense 64 MiB list in gigabytes of whitespace keeps to it, and parsed is ~20
// million values, gigabytes), and no field agora writes comes near it: a purged product or
// manifest is over a hundred bytes.
func valueDensity(key string, raw []byte) error {
	if len(raw) < denseValueFrom {
		return nil
	}
	if nodes := bytes.Count(raw, []byte{'{'}) + bytes.Count(raw, []byte{'['}); nodes > len(raw)/minBytesPerNode+frameNodes {
		return fmt.Errorf("%w: field %q: %d objects and lists in %d bytes, more than one per %d bytes, which no bundle agora writes holds (refused before parsing: reading it would take far more memory than the field)",
			ErrBundle, truncate(key, 40), nodes, len(raw), minBytesPerNode)
	}
	return nil
}

// densityRest counts the rest of the file after a malformed part, so that a bundle too dense
// to parse is refused for that, as [ParseBundle] refuses it before parsing.
func (sr *streamReader) densityRest() error {
	buf := make([]byte, streamWindow)
	for sr.counted < sr.size && sr.readErr == nil {
		k, err := sr.r.ReadAt(buf[:min(int64(len(buf)), sr.size-sr.counted)], sr.counted)
		sr.nodes += bytes.Count(buf[:k], []byte{'{'}) + bytes.Count(buf[:k], []byte{'['})
		sr.counted += int64(k)
		if k == 0 || err != nil && !errors.Is(err, io.EOF) {
			break
		}
	}
	return sr.density()
}

// ErrTooLarge is matched by [CheckStreamable]'s errors: a bundle verify would refuse.
var ErrTooLarge = errors.New("too large for agora verify")

// CheckStreamable reports whether [VerifyStream] takes every value of b as [WriteBundle] writes
// it: each field but the entries, and each entry, at most [MaxStreamValue] bytes. Nothing else
// limits a bundle verify streams, so an exporter that calls it before writing writes no
// bundle verify refuses. When a later start would fit, the error names it (--since).
func CheckStreamable(b *Bundle) error {
	fields := []struct {
		name string
		v    any
	}{
		{"selection", b.Selection}, {"checkpoint", b.Checkpoint}, {"anchored", b.Anchored},
		{"manifests", b.Manifests}, {"selection_note", b.SelectionNote},
		{"purged", b.Purged}, {"purged_runs", b.PurgedRuns},
	}
	for _, f := range fields {
		n, err := indentedSize(f.v)
		if err != nil {
			return err
		}
		if n <= streamValueCap {
			continue
		}
		err = fmt.Errorf("%w: its %s field would be %d bytes, over the %d bytes agora verify reads of one field", ErrTooLarge, f.name, n, streamValueCap)
		var since uint64
		var ok bool
		switch f.name {
		case "purged":
			since, ok = laterStart(b.Purged, func(p Purged) uint64 { return p.Entry })
		case "purged_runs":
			since, ok = laterStart(b.PurgedRuns, func(p PurgedRun) uint64 { return p.Entry })
		}
		if ok {
			return fmt.Errorf("%w; export from a later entry: --since %d fits", err, since)
		}
		return fmt.Errorf("%w; export fewer entries (a later --since, or --kind)", err)
	}
	for _, e := range b.Entries {
		// Base64 and its quotes, each proof hash on its own indented line, the keys and the index.
		n := base64.StdEncoding.EncodedLen(len(e.Entry)) + base64.StdEncoding.EncodedLen(len(e.LeafHash)) +
			len(e.InclusionProof)*(base64.StdEncoding.EncodedLen(HashSize)+8) + 256
		if n > streamValueCap {
			return fmt.Errorf("%w: entry %d would be about %d bytes, over the %d bytes agora verify reads of one entry", ErrTooLarge, e.Index, n, streamValueCap)
		}
	}
	return nil
}

// indentedSize is the size of v as WriteBundle writes a top-level field's value.
func indentedSize(v any) (int, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(" ", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0, fmt.Errorf("measure the bundle: %w", err)
	}
	return buf.Len(), nil
}

// laterStart is the smallest entry index such that the items of list recorded at or after it
// (entry gives an item's entry, in increasing order) fit in MaxStreamValue, as an export from
// that index would list them; ok is false when none but the last entry's would.
func laterStart[T any](list []T, entry func(T) uint64) (since uint64, ok bool) {
	fits := func(i int) bool {
		n, err := indentedSize(list[i:])
		return err == nil && n <= streamValueCap
	}
	// The smallest i whose suffix fits: fits is false at 0 (the caller's list is too large)
	// and grows true with i.
	lo, hi := 1, len(list)
	for lo < hi {
		mid := (lo + hi) / 2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	// Start at an entry: an export from the entry of list[lo-1] would hold all its items.
	for lo < len(list) && entry(list[lo]) == entry(list[lo-1]) {
		lo++
	}
	if lo >= len(list) {
		return 0, false
	}
	return entry(list[lo]), true
}
