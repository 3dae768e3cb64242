package verify

import (
	"bytes"
	"fmt"
	"strings"
)

// The purged and purged-runs rows have one shape: the bundle carries a list that must equal,
// item for item, what its verified entries of one kind record. These two helpers are that
// shape, so a third such list (and a fix to one) is written once.

// entriesOfKind calls each, in entry order, for every entry of es whose kind is kind. tag is
// how the entry's canonical bytes name that kind: entries without it are passed over undecoded.
func entriesOfKind(es []Entry, kind string, tag []byte, each func(idx uint64, f EntryFields) error) error {
	for _, e := range es {
		if err := entryOfKind(e, kind, tag, each); err != nil {
			return err
		}
	}
	return nil
}

// entryOfKind is [entriesOfKind] of one entry.
func entryOfKind(e Entry, kind string, tag []byte, each func(idx uint64, f EntryFields) error) error {
	if !bytes.Contains(e.Entry, tag) {
		return nil
	}
	f, err := DecodeEntry(e.Entry)
	if err != nil {
		return fmt.Errorf("entry %d: %v", e.Index, err)
	}
	if f.Kind != kind {
		return nil
	}
	return each(e.Index, f)
}

// holdsTag reports whether any entry of the bundle may be of the kind tag names.
func (v *verifier) holdsTag(tag []byte) bool {
	if v.stream != nil {
		return v.stream.holds[string(tag)]
	}
	for _, e := range v.b.Entries {
		if bytes.Contains(e.Entry, tag) {
			return true
		}
	}
	return false
}

// listedWords are a list row's messages: each names one item for the reader.
type listedWords[T comparable] struct {
	twice      func(T) string // listed twice
	unlisted   func(T) string // recorded by an entry, not in the list
	unrecorded func(T) string // in the list, recorded by no verified entry
	item       func(T) string // one item of the passing row
	passed     string         // the passing row, before its items: "%d ..."
}

// checkListed fails check when listed and want (what the verified entries record, in entry
// order) differ by an item or listed holds one twice; otherwise it passes naming at most
// maxPurgedListed items.
func checkListed[T comparable](v *verifier, check string, listed, want []T, w listedWords[T]) {
	in := make(map[T]bool, len(listed))
	for _, p := range listed {
		if in[p] {
			v.fail(check, "", "%s", w.twice(p))
			return
		}
		in[p] = true
	}
	recorded := make(map[T]bool, len(want))
	for _, p := range want {
		recorded[p] = true
		if !in[p] {
			v.fail(check, "", "%s", w.unlisted(p))
			return
		}
	}
	for _, p := range listed {
		if !recorded[p] {
			v.fail(check, "", "%s", w.unrecorded(p))
			return
		}
	}
	var names []string
	for i, p := range want {
		if i == maxPurgedListed {
			names = append(names, fmt.Sprintf("and %d more", len(want)-i))
			break
		}
		names = append(names, w.item(p))
	}
	v.pass(check, "", w.passed+": %s", len(want), strings.Join(names, ", "))
}
