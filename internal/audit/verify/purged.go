package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// CheckPurged is the row of products retention purged (docs/audit-bundle.md "Purged products").
const CheckPurged = "purged"

// Purged is one product of a dispatch that retention deleted from the blob store: the bundle
// names it so a reader knows the product is gone on purpose. Each is recorded by the
// retention.purged entry at Entry, which the bundle holds; the list is exactly what the
// bundle's retention.purged entries record, in their order.
type Purged struct {
	Entry    uint64 `json:"entry"`    // index of the retention.purged entry
	Dispatch string `json:"dispatch"` // the dispatch id (the entry's subject is dispatch/ID)
	Product  string `json:"product"`  // patch, output:PATH, input, input:KEY/PATH, stdout, stderr, transcript
	Digest   string `json:"digest"`   // sha256:HEX of the purged blob
}

// purgedKind is how a retention.purged entry's canonical bytes name its kind.
var purgedKind = []byte(`"kind":"` + entry.RetentionPurged + `"`)

// PurgedOf lists the products es's retention.purged entries record, in entry order. An entry
// of that kind that does not decode, or whose details do not name products as agora writes
// them, is an error.
func PurgedOf(es []Entry) ([]Purged, error) {
	var out []Purged
	err := entriesOfKind(es, entry.RetentionPurged, purgedKind, func(idx uint64, f EntryFields) error {
		ps, err := purgedIn(idx, f)
		out = append(out, ps...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func purgedIn(idx uint64, f EntryFields) ([]Purged, error) {
	id, ok := strings.CutPrefix(f.Subject, "dispatch/")
	if !ok || id == "" {
		return nil, fmt.Errorf("entry %d: a retention.purged entry about %q, not a dispatch", idx, truncate(f.Subject, 60))
	}
	prods, ok := f.Details[entry.KeyProducts].([]any)
	if !ok || len(prods) == 0 {
		return nil, fmt.Errorf("entry %d: a retention.purged entry that names no products", idx)
	}
	out := make([]Purged, 0, len(prods))
	for i, p := range prods {
		m, _ := p.(map[string]any)
		name, _ := m[entry.KeyProduct].(string)
		dg, _ := m[entry.KeyDigest].(string)
		if name == "" || !isDigest(dg) {
			return nil, fmt.Errorf("entry %d: product %d is not a product name and a sha256 digest", idx, i)
		}
		out = append(out, Purged{Entry: idx, Dispatch: id, Product: name, Digest: dg})
	}
	return out, nil
}

func isDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// maxPurgedListed caps the products the passing row names.
const maxPurgedListed = 20

// checkPurged compares the bundle's purged list with what its retention.purged entries record
// (those whose own checks passed). A product dropped from the list, or one listed that no
// entry records (a product missing with no purge record), fails the row. A bundle with
// neither has no row.
func (v *verifier) checkPurged() {
	if len(v.b.Purged) == 0 && !v.holdsTag(purgedKind) {
		return
	}
	var want []Purged
	var err error
	if v.stream != nil {
		want, err = v.stream.purged, v.stream.purgedErr
	} else {
		want, err = PurgedOf(v.verifiedEntries())
	}
	if err != nil {
		v.fail(CheckPurged, "", "%v", err)
		return
	}
	checkListed(v, CheckPurged, v.b.Purged, want, listedWords[Purged]{
		twice: func(p Purged) string {
			return fmt.Sprintf("%s %s of dispatch %s is listed twice", p.Product, p.Digest, truncate(p.Dispatch, 60))
		},
		unlisted: func(p Purged) string {
			return fmt.Sprintf("entry %d records %s (%s) of dispatch %s purged, but the bundle's purged list does not name it",
				p.Entry, truncate(p.Product, 80), p.Digest, truncate(p.Dispatch, 60))
		},
		unrecorded: func(p Purged) string {
			return fmt.Sprintf("the purged list names %s (%s) of dispatch %s, which no verified retention.purged entry of the bundle records: a product missing without a purge record",
				truncate(p.Product, 80), truncate(p.Digest, 80), truncate(p.Dispatch, 60))
		},
		item: func(p Purged) string {
			return fmt.Sprintf("%s %s (%s)", truncate(p.Dispatch, 60), truncate(p.Product, 80), p.Digest)
		},
		passed: "%d products purged by retention, each recorded by a retention.purged entry",
	})
}

// verifiedEntries are the bundle's entries whose entry and inclusion rows passed.
func (v *verifier) verifiedEntries() []Entry {
	failed := map[string]bool{}
	for _, c := range v.rep.Checks {
		if !c.OK && (c.Check == CheckEntry || c.Check == CheckInclusion) {
			failed[c.Item] = true
		}
	}
	var ok []Entry
	for _, e := range v.b.Entries {
		if !failed[strconv.FormatUint(e.Index, 10)] {
			ok = append(ok, e)
		}
	}
	return ok
}
