package rowlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrDamaged is wrapped by every decoding error: a record that does not decode is a
// damaged orch.db, never skipped.
var ErrDamaged = errors.New("damaged row log record")

// Decode parses a record Encode wrote. It never panics and never allocates more than the
// record's own length implies: every count is checked against the bytes left.
func Decode(b []byte) (*Record, error) {
	r := Reader{plain: true}
	return r.Decode(b)
}

// Reader decodes records one after another, reusing one Record's lists and keeping one copy
// of each short field value it has read (a run's id, a state, an attempt's dispatch id, which
// a run's records repeat): reading a fold's records back then allocates little beyond the
// values seen for the first time. The zero Reader is ready to use.
type Reader struct {
	rec  Record
	runs []string
	seen map[string]string // the values kept, each its own key
	// plain is set for a single record ([Decode]): nothing to share its values with.
	plain bool
}

// Interning keeps values up to maxInterned bytes, and at most maxSeen of them: past that the
// Reader starts over, so a long log costs it no more than a fold's worth.
const (
	maxInterned = 64
	maxSeen     = 8192
)

// Decode is [Decode] into r's Record, which stays valid until the next call.
func (r *Reader) Decode(b []byte) (*Record, error) {
	switch {
	case r.plain:
	case r.seen == nil:
		r.seen = map[string]string{}
	case len(r.seen) > maxSeen:
		clear(r.seen)
	}
	d := decoder{b: b, seen: r.seen}
	if v := d.byte(); d.err == nil && v != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrDamaged, v, Version)
	}
	nruns := d.count(1)
	runs := r.runs[:0]
	for range nruns {
		runs = append(runs, d.string())
	}
	r.runs = runs
	run := func() string {
		n := d.uint()
		if d.err == nil && n >= uint64(len(runs)) {
			d.fail("run reference %d of %d runs", n, len(runs))
		}
		if d.err != nil {
			return ""
		}
		return runs[n]
	}
	rec := &r.rec
	nt := d.count(14)
	rec.Tasks = slices.Grow(rec.Tasks[:0], nt)
	for range nt {
		var t Task
		t.RunID, t.Idx, t.State = run(), d.int(), d.string()
		t.Attempts, t.Failures, t.DispatchID = d.int(), d.int(), d.string()
		t.ReadySeq = int64(d.int())
		t.RetryAt, t.Reason, t.Detail, t.Question, t.Answer = d.string(), d.string(), d.string(), d.string(), d.string()
		t.Cancel, t.Review = d.bool(), d.string()
		rec.Tasks = append(rec.Tasks, t)
	}
	ni := d.count(7)
	rec.Inserts = slices.Grow(rec.Inserts[:0], ni)
	for range ni {
		var a Attempt
		a.DispatchID, a.RunID, a.TaskIdx, a.Number = d.string(), run(), d.int(), d.int()
		a.ParentID, a.Inputs, a.FiredAt = d.string(), d.string(), d.string()
		rec.Inserts = append(rec.Inserts, a)
	}
	ne := d.count(6)
	rec.Ends = slices.Grow(rec.Ends[:0], ne)
	for range ne {
		var x End
		x.ID, x.State, x.Reason, x.EndedAt, x.Usage, x.Verdict = d.string(), d.string(), d.string(), d.string(), d.string(), d.string()
		rec.Ends = append(rec.Ends, x)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		r.rec = Record{Tasks: rec.Tasks[:0], Inserts: rec.Inserts[:0], Ends: rec.Ends[:0]}
		return nil, d.err
	}
	return rec, nil
}

// decoder reads a record's fields, keeping the first error; after it every read returns
// a zero value.
type decoder struct {
	b    []byte
	err  error
	seen map[string]string // Reader.seen, nil: no interning
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a non-negative number that fits an int.
func (d *decoder) int() int {
	v := d.uint()
	if v > 1<<62 {
		d.fail("number %d out of range", v)
		return 0
	}
	return int(v)
}

// count reads a list's length, each element at least min bytes: a count the bytes left
// cannot hold is refused before anything is allocated for it.
func (d *decoder) count(min int) int {
	v := d.uint()
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.fail("%d elements in %d bytes", v, len(d.b))
	}
	if d.err != nil {
		return 0
	}
	return int(v)
}

func (d *decoder) string() string {
	n := d.uint()
	if d.err == nil && (n > uint64(len(d.b)) || n > MaxField) {
		d.fail("a field of %d bytes in %d", n, len(d.b))
	}
	if d.err != nil {
		return ""
	}
	v := d.b[:n]
	d.b = d.b[n:]
	if d.seen == nil || n > maxInterned {
		return string(v)
	}
	if s, ok := d.seen[string(v)]; ok {
		return s
	}
	s := string(v)
	d.seen[s] = s
	return s
}

func (d *decoder) bool() bool {
	switch c := d.byte(); {
	case d.err != nil:
		return false
	case c == 0:
		return false
	case c == 1:
		return true
	default:
		d.fail("boolean byte %d", c)
		return false
	}
}
