package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/jcs"
)

// MaxEntrySize caps one entry's canonical bytes.
const MaxEntrySize = 1 << 20

// EntryFields are the fields of an audit entry, decoded from its canonical bytes.
type EntryFields struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

var entryKeys = []string{"actor", "details", "kind", "seq", "subject", "time"}

// DecodeEntry decodes an entry and checks it is in its one canonical form: RFC 8785 JSON of an
// object with exactly the keys seq, time (RFC 3339), actor, kind, subject and details (an
// object).
func DecodeEntry(b []byte) (EntryFields, error) {
	if len(b) > MaxEntrySize {
		return EntryFields{}, fmt.Errorf("entry is larger than %d bytes", MaxEntrySize)
	}
	if f, ok := decodeCanonical(b); ok {
		return f, nil
	}
	return decodeEntrySlow(b)
}

// decodeEntrySlow is DecodeEntry by encoding/json and jcs: the reference for every entry,
// and the reading (and error) of every entry decodeCanonical does not take.
func decodeEntrySlow(b []byte) (EntryFields, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return EntryFields{}, fmt.Errorf("entry is not a JSON object: %v", err)
	}
	// Read before toCanonical turns the numbers of m into int64 and float64 in place.
	seq, seqOK := m["seq"].(json.Number)
	plain, err := toCanonical(m)
	if err != nil {
		return EntryFields{}, fmt.Errorf("entry: %v", err)
	}
	canon, err := jcs.Marshal(plain)
	if err != nil {
		return EntryFields{}, fmt.Errorf("entry: %v", err)
	}
	if !bytes.Equal(canon, b) {
		return EntryFields{}, fmt.Errorf("entry is not canonical JSON (RFC 8785)")
	}
	if len(m) != len(entryKeys) {
		return EntryFields{}, fmt.Errorf("entry has keys other than %s", strings.Join(entryKeys, ", "))
	}
	var f EntryFields
	if !seqOK {
		return EntryFields{}, fmt.Errorf("entry seq is not a number")
	}
	if _, err := fmt.Sscan(seq.String(), &f.Seq); err != nil {
		return EntryFields{}, fmt.Errorf("entry seq %q is not a non-negative integer", seq)
	}
	at, _ := m["time"].(string)
	if f.Time, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return EntryFields{}, fmt.Errorf("entry time %q is not RFC 3339", truncate(at, 40))
	}
	var okA, okK, okS, okD bool
	f.Actor, okA = m["actor"].(string)
	f.Kind, okK = m["kind"].(string)
	f.Subject, okS = m["subject"].(string)
	f.Details, okD = plain.(map[string]any)["details"].(map[string]any)
	if !okA || !okK || !okS || !okD {
		return EntryFields{}, fmt.Errorf("entry actor, kind and subject must be strings and details an object")
	}
	return f, nil
}

// toCanonical turns decoded JSON (with json.Number) into the types [jcs.Marshal] accepts,
// in place: maps and slices are changed and returned, not copied.
func toCanonical(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %q out of range", truncate(x.String(), 24))
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			c, err := toCanonical(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case []any:
		for i, e := range x {
			c, err := toCanonical(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	}
	return v, nil
}

// LeafHash is the RFC 6962 leaf hash: SHA-256(0x00 || data).
func LeafHash(data []byte) []byte {
	h := leafHashers.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte{0})
	h.Write(data)
	sum := h.Sum(nil)
	leafHashers.Put(h)
	return sum
}

// leafHashers holds SHA-256 states for LeafHash: an engine hashes every entry it appends,
// and a state per call was a third of what appending an entry allocates.
var leafHashers = sync.Pool{New: func() any { return sha256.New() }}

// KindMatches reports whether kind matches pattern: equal to it, or, for a pattern ending in
// ".*", starting with the part before the "*".
func KindMatches(pattern, kind string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasSuffix(prefix, ".") {
		return strings.HasPrefix(kind, prefix)
	}
	return pattern == kind
}
