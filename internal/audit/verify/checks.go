package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// maxProofLen bounds a proof: a tree of 2^64 leaves needs at most 64 hashes.
const maxProofLen = 64

// parallelFrom is the entry count from which checkEntries spreads the work over the CPUs.
const parallelFrom = 1024

// checkEntries checks the entry list against the selection, then each entry and its proof.
// Entries are independent, so large bundles are checked in chunks on every CPU; the rows are
// merged back in entry order, so the report is the same as a sequential run's.
func (v *verifier) checkEntries() {
	v.checkEntryList()
	es := v.b.Entries
	v.tree = newFullTree(v)
	workers := runtime.GOMAXPROCS(0)
	defer v.countOmittedFails()
	if len(es) < parallelFrom || workers < 2 {
		v.checkEntryRange(es)
		return
	}
	chunk := (len(es) + workers - 1) / workers
	parts := make([]*verifier, 0, workers)
	var wg sync.WaitGroup
	for start := 0; start < len(es); start += chunk {
		part := es[start:min(start+chunk, len(es))]
		// Two rows an entry (its own, its inclusion): made once, not grown by doubling, the
		// copies of which were garbage the memory limit collected.
		w := &verifier{b: v.b, cp: v.cp, tree: v.tree, inRun: v.inRun, rep: &Report{Checks: make([]Result, 0, 2*len(part))}, refs: map[string]uint64{}}
		parts = append(parts, w)
		wg.Go(func() { w.checkEntryRange(part) })
	}
	wg.Wait()
	rows := 0
	for _, w := range parts {
		rows += len(w.rep.Checks)
	}
	v.rep.Checks = slices.Grow(v.rep.Checks, rows)
	for _, w := range parts {
		v.entryFails += w.entryFails
		v.rep.Checks = append(v.rep.Checks, w.rep.Checks...)
		v.entries = append(v.entries, w.entries...)
		// Parts in entry order, a later one's index over an earlier's: the last entry that
		// records a manifest names it, as in a sequential run (checkEntry).
		for ref, idx := range w.refs {
			v.refs[ref] = idx
		}
	}
}

// countOmittedFails adds the row that counts the failed entry and inclusion rows
// [verifier.fail] did not keep.
func (v *verifier) countOmittedFails() {
	if v.entryFails <= maxEntryFailRows {
		return
	}
	listed := 0
	for _, c := range v.rep.Checks {
		if !c.OK && (c.Check == CheckEntry || c.Check == CheckInclusion) {
			listed++
		}
	}
	if omitted := v.entryFails - listed; omitted > 0 {
		v.rep.Checks = append(v.rep.Checks, Result{Check: CheckEntry, OK: false,
			Detail: fmt.Sprintf("%d more failed entry and inclusion checks, not listed (the first %d are)", omitted, listed)})
	}
}

func (v *verifier) checkEntryRange(es []Entry) {
	for _, e := range es {
		item := strconv.FormatUint(e.Index, 10)
		v.checkEntry(e, item)
		v.checkInclusion(e, item)
	}
}

func (v *verifier) checkEntryList() {
	if v.stream != nil {
		v.entryListRow(v.stream.list)
		return
	}
	l := newEntryList(v.b)
	for _, e := range v.b.Entries {
		l.add(e.Index)
	}
	v.entryListRow(l)
}

// entryListRow adds the entries row for the indexes l was given.
func (v *verifier) entryListRow(l *entryList) {
	if problem := l.problem(); problem != "" {
		v.fail(CheckEntries, "", "%s", problem)
		return
	}
	v.pass(CheckEntries, "", "%d entries, indexes %d to %d, match the selection", l.n, l.first, l.prev)
}

// entryList checks the entries' indexes against the selection one index at a time, keeping
// only the first and the last: the whole-file and the streaming verifier share it, so both
// name the same first problem.
type entryList struct {
	sel    Selection
	legacy bool
	n      int
	first  uint64
	prev   uint64
	// pair is the first problem between two consecutive indexes, "" while there is none.
	pair string
}

func newEntryList(b *Bundle) *entryList { return &entryList{sel: b.Selection, legacy: b.legacy()} }

func (l *entryList) add(cur uint64) {
	switch {
	case l.n == 0:
		l.first = cur
	case l.pair == "" && (cur <= l.prev || l.sel.contiguous() && cur != l.prev+1):
		l.pair = l.pairProblem(cur)
	}
	l.prev = cur
	l.n++
}

func (l *entryList) pairProblem(cur uint64) string {
	switch prev := l.prev; {
	case cur == prev:
		return fmt.Sprintf("entry %d appears twice", cur)
	case cur < prev:
		return fmt.Sprintf("entry %d comes after entry %d: entries are out of order", cur, prev)
	}
	return fmt.Sprintf("entries %d to %d are missing from a contiguous selection", l.prev+1, cur-1)
}

// problem is the first thing wrong with the list, in the order the entries row checks it, or
// "" when it matches the selection.
func (l *entryList) problem() string {
	sel := l.sel
	switch {
	case l.n == 0:
		return "the bundle holds no entries"
	case sel.Count != l.n:
		return fmt.Sprintf("selection says %d entries, the bundle holds %d", sel.Count, l.n)
	case l.first < sel.FromIndex:
		return fmt.Sprintf("entry %d precedes the selection's first index %d", l.first, sel.FromIndex)
	case sel.contiguous() && l.first != sel.FromIndex:
		return fmt.Sprintf("first entry is %d, the selection starts at %d", l.first, sel.FromIndex)
	case l.pair != "":
		return l.pair
	case !l.legacy && l.prev >= sel.EndIndex:
		return fmt.Sprintf("entry %d is at or past the selection's end index %d", l.prev, sel.EndIndex)
	}
	return ""
}

func (v *verifier) checkEntry(e Entry, item string) {
	if got := v.leafHash(e.Entry); !bytes.Equal(got[:], e.LeafHash) {
		v.fail(CheckEntry, item, "leaf hash %x recorded, %x computed from the entry bytes", e.LeafHash, got[:])
		return
	}
	// A plain bundle's entries are read for their summary only; a run's checks read the
	// decoded entries, and any entry the summary does not take is decoded in full for its
	// error.
	var f EntryFields
	s, ok := entrySummary{}, false
	if !v.inRun {
		s, ok = decodeSummary(e.Entry)
	}
	if !ok {
		var err error
		if f, err = DecodeEntry(e.Entry); err != nil {
			v.fail(CheckEntry, item, "%v", err)
			return
		}
		s = summaryOf(f)
	}
	if s.seq != e.Index {
		v.fail(CheckEntry, item, "entry records seq %d, bundle says index %d", s.seq, e.Index)
		return
	}
	if k := v.b.Selection.Kind; k != "" && !KindMatches(k, s.kind) {
		v.fail(CheckEntry, item, "kind %q does not match the selection %q", truncate(s.kind, 60), truncate(k, 60))
		return
	}
	if subs := v.b.Selection.Subjects; len(subs) > 0 && !SubjectMatches(subs, s.subject) {
		v.fail(CheckEntry, item, "subject %q is not one the selection names", truncate(s.subject, 60))
		return
	}
	if v.inRun {
		// Only the run's checks read the decoded entries; a plain bundle's are let go.
		v.entries = append(v.entries, f)
	}
	if s.hasManifest && (v.stream == nil || v.stream.refs) {
		v.refs[s.manifest] = e.Index
	}
	if v.stream != nil {
		v.stream.passedEntries++
		return
	}
	// Written without fmt: a 100,000-entry bundle has as many of these rows.
	v.rep.Checks = append(v.rep.Checks, Result{Check: CheckEntry, Item: item, OK: true,
		Detail: s.kind + " " + truncate(s.subject, 60) + ", leaf hash " + hex.EncodeToString(e.LeafHash[:8])})
}

// leafHash is [LeafHash] with this verifier's hash state (one per goroutine), into an array:
// two allocations fewer per entry.
func (v *verifier) leafHash(data []byte) (sum [HashSize]byte) {
	if v.lh == nil {
		v.lh = sha256.New()
	}
	v.lh.Reset()
	v.lh.Write([]byte{0})
	v.lh.Write(data)
	v.lh.Sum(sum[:0])
	return sum
}

func (v *verifier) checkInclusion(e Entry, item string) {
	if weakenInclusion {
		v.pass(CheckInclusion, item, "not checked: built with -tags agora_weaken")
		return
	}
	if v.cp == nil {
		v.fail(CheckInclusion, item, "cannot check: the checkpoint did not verify")
		return
	}
	if err := checkHashes(e.InclusionProof); err != nil {
		v.fail(CheckInclusion, item, "%v", err)
		return
	}
	if len(e.LeafHash) != HashSize {
		v.fail(CheckInclusion, item, "leaf hash is %d bytes, want %d", len(e.LeafHash), HashSize)
		return
	}
	// A bundle of the whole tree whose leaves give the checkpoint's root: a proof passes
	// when it is the path through that tree. Any other proof is walked, which says why.
	if v.tree != nil && v.tree.provesLeaf(e.Index, e.InclusionProof) {
		v.rep.Checks = append(v.rep.Checks, Result{Check: CheckInclusion, Item: item, OK: true, Detail: v.tree.inTree})
		return
	}
	if v.incl == nil {
		v.incl = newInclusionChecker()
	}
	verify := v.incl.verify
	if v.stream != nil {
		verify = v.stream.paths.verify
	}
	if err := verify(e.Index, v.cp.Size, e.LeafHash, e.InclusionProof, v.cp.Hash); err != nil {
		v.fail(CheckInclusion, item, "not in the checkpoint's tree of size %d: %v", v.cp.Size, err)
		return
	}
	if v.stream != nil {
		v.stream.passedInclusions++
		return
	}
	v.pass(CheckInclusion, item, "in the tree of size %d", v.cp.Size)
}

// checkAnchored checks the anchored checkpoint, its consistency with the bundle's checkpoint,
// that it covers every entry, and each anchor's evidence.
func (v *verifier) checkAnchored() {
	a := v.b.Anchored
	if a == nil {
		v.checkAnchoredCopy()
		return
	}
	if v.key == nil {
		v.fail(CheckAnchoredCheckpoint, "", "cannot check the signature: no usable key")
	} else if c, err := OpenCheckpoint(a.Checkpoint, v.key, v.b.Origin); err != nil {
		v.fail(CheckAnchoredCheckpoint, "", "%v", err)
	} else {
		v.anc = &c
		v.pass(CheckAnchoredCheckpoint, "", "signed by %s, size %d", keyID(v.key), c.Size)
	}
	v.checkConsistency(a.ConsistencyProof)
	v.checkCoverage()
	if len(a.Evidence) == 0 {
		v.fail(CheckAnchor, "", "an anchored checkpoint with no anchor evidence")
	}
	for _, ev := range a.Evidence {
		v.checkEvidence(ev)
	}
	v.checkAnchoredCopy()
}

func (v *verifier) checkConsistency(p [][]byte) {
	if v.cp == nil || v.anc == nil {
		v.fail(CheckConsistency, "", "cannot check: a checkpoint did not verify")
		return
	}
	if err := checkHashes(p); err != nil {
		v.fail(CheckConsistency, "", "%v", err)
		return
	}
	small, large := v.cp, v.anc
	if small.Size > large.Size {
		small, large = large, small
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small.Size, large.Size, p, small.Hash, large.Hash); err != nil {
		v.fail(CheckConsistency, "", "tree of size %d is not a prefix of tree of size %d: %v", small.Size, large.Size, err)
		return
	}
	v.pass(CheckConsistency, "", "tree of size %d is a prefix of tree of size %d", small.Size, large.Size)
}

func (v *verifier) checkCoverage() {
	if v.anc == nil {
		v.fail(CheckAnchorCoverage, "", "cannot check: the anchored checkpoint did not verify")
		return
	}
	if v.stream != nil {
		if v.stream.uncovered {
			v.fail(CheckAnchorCoverage, "", "entry %d is after the anchored checkpoint (size %d): it is not anchored", v.stream.firstUncovered, v.anc.Size)
			return
		}
	} else {
		for _, e := range v.b.Entries {
			if e.Index >= v.anc.Size {
				v.fail(CheckAnchorCoverage, "", "entry %d is after the anchored checkpoint (size %d): it is not anchored", e.Index, v.anc.Size)
				return
			}
		}
	}
	v.pass(CheckAnchorCoverage, "", "every entry is below the anchored size %d", v.anc.Size)
}

func checkHashes(p [][]byte) error {
	if len(p) > maxProofLen {
		return fmt.Errorf("proof has %d hashes, at most %d are possible", len(p), maxProofLen)
	}
	for i, h := range p {
		if len(h) != HashSize {
			return fmt.Errorf("proof hash %d is %d bytes, want %d", i, len(h), HashSize)
		}
	}
	return nil
}
