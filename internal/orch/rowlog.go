package orch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// The task and attempt rows are written as a log (docs/ARCHITECTURE.md "orch.db"): each
// commit stores its batch's row changes as one binary record in row_log, with the batch's
// audit entries, instead of a task update, an attempt insert and an attempt end per task.
// The tasks and attempts tables are brought up to date from the log later, when the engine
// is idle (fold.go); every reader reads the tables and the records not yet folded in one
// read transaction (overlay.go). A record holds whole row images, never deltas, so applying
// the records in order is the same as having run the statements they replace.

// logRecord is one batch's row changes, in the order the statements ran.
type logRecord struct {
	tasks   []taskImage    // task rows updated: every column an update writes
	inserts []attemptImage // attempts fired: their rows as inserted ('live')
	ends    []endImage     // attempts ended
}

// endImage is an attempt's end: the columns it sets.
type endImage struct {
	id, state, reason, endedAt, usage, verdict string
}

// taskImage is a task row's updatable columns as of the batch.
type taskImage struct {
	runID      string
	idx        int
	state      string
	attempts   int
	failures   int
	dispatchID string
	readySeq   int64
	retryAt    string // ts form, "" for none
	reason     string
	detail     string
	question   string
	answer     string
	cancel     bool
	review     string
}

// attemptImage is an attempt row: as inserted (state live) or, in an overlay, as ended.
type attemptImage struct {
	dispatchID, runID string
	taskIdx, number   int
	state, reason     string
	parentID, inputs  string
	firedAt, endedAt  string
	usage, verdict    string
}

// logVersion is the first byte of every record; a record of another version is refused.
const logVersion = 1

// maxLogField bounds one string of a record (a task's detail or question, an attempt's
// verdict): the decoder refuses longer ones before allocating.
const maxLogField = 16 << 20

// encode appends r's binary form to dst. Run ids are written once per record and named by
// their position in its run table; times as unix nanoseconds (0: none).
func (r *logRecord) encode(dst []byte) []byte {
	dst = append(dst, logVersion)
	runs := map[string]uint64{}
	var order []string
	ref := func(id string) uint64 {
		n, ok := runs[id]
		if !ok {
			n = uint64(len(order))
			runs[id] = n
			order = append(order, id)
		}
		return n
	}
	for i := range r.tasks {
		ref(r.tasks[i].runID)
	}
	for i := range r.inserts {
		ref(r.inserts[i].runID)
	}
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, id := range order {
		dst = appendString(dst, id)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.tasks)))
	for i := range r.tasks {
		t := &r.tasks[i]
		dst = binary.AppendUvarint(dst, runs[t.runID])
		dst = binary.AppendUvarint(dst, uint64(t.idx))
		dst = appendString(dst, t.state)
		dst = binary.AppendUvarint(dst, uint64(t.attempts))
		dst = binary.AppendUvarint(dst, uint64(t.failures))
		dst = appendString(dst, t.dispatchID)
		dst = binary.AppendUvarint(dst, uint64(t.readySeq))
		dst = appendString(dst, t.retryAt)
		dst = appendString(dst, t.reason)
		dst = appendString(dst, t.detail)
		dst = appendString(dst, t.question)
		dst = appendString(dst, t.answer)
		dst = appendBool(dst, t.cancel)
		dst = appendString(dst, t.review)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.inserts)))
	for i := range r.inserts {
		a := &r.inserts[i]
		dst = appendString(dst, a.dispatchID)
		dst = binary.AppendUvarint(dst, runs[a.runID])
		dst = binary.AppendUvarint(dst, uint64(a.taskIdx))
		dst = binary.AppendUvarint(dst, uint64(a.number))
		dst = appendString(dst, a.parentID)
		dst = appendString(dst, a.inputs)
		dst = appendString(dst, a.firedAt)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.ends)))
	for i := range r.ends {
		x := &r.ends[i]
		dst = appendString(dst, x.id)
		dst = appendString(dst, x.state)
		dst = appendString(dst, x.reason)
		dst = appendString(dst, x.endedAt)
		dst = appendString(dst, x.usage)
		dst = appendString(dst, x.verdict)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// errLogRecord is wrapped by every decoding error: a record that does not decode is a
// damaged orch.db, never skipped.
var errLogRecord = errors.New("damaged row log record")

// decodeLogRecord parses a record encode wrote. It never panics and never allocates more
// than the record's own length implies: every count is checked against the bytes left.
func decodeLogRecord(b []byte) (*logRecord, error) {
	d := logDecoder{b: b}
	if v := d.byte(); d.err == nil && v != logVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errLogRecord, v, logVersion)
	}
	nruns := d.count(1)
	runs := make([]string, 0, nruns)
	for range nruns {
		runs = append(runs, d.string())
	}
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
	r := &logRecord{}
	nt := d.count(14)
	r.tasks = make([]taskImage, 0, nt)
	for range nt {
		var t taskImage
		t.runID, t.idx, t.state = run(), d.int(), d.string()
		t.attempts, t.failures, t.dispatchID = d.int(), d.int(), d.string()
		t.readySeq = int64(d.int())
		t.retryAt, t.reason, t.detail, t.question, t.answer = d.string(), d.string(), d.string(), d.string(), d.string()
		t.cancel, t.review = d.bool(), d.string()
		r.tasks = append(r.tasks, t)
	}
	ni := d.count(7)
	r.inserts = make([]attemptImage, 0, ni)
	for range ni {
		a := attemptImage{state: lifecycle.AttemptLive, inputs: "[]"}
		a.dispatchID, a.runID, a.taskIdx, a.number = d.string(), run(), d.int(), d.int()
		a.parentID, a.inputs, a.firedAt = d.string(), d.string(), d.string()
		r.inserts = append(r.inserts, a)
	}
	ne := d.count(6)
	r.ends = make([]endImage, 0, ne)
	for range ne {
		var x endImage
		x.id, x.state, x.reason, x.endedAt, x.usage, x.verdict = d.string(), d.string(), d.string(), d.string(), d.string(), d.string()
		r.ends = append(r.ends, x)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// logDecoder reads a record's fields, keeping the first error; after it every read returns
// a zero value.
type logDecoder struct {
	b   []byte
	err error
}

func (d *logDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errLogRecord, fmt.Sprintf(format, args...))
	}
}

func (d *logDecoder) byte() byte {
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

func (d *logDecoder) uint() uint64 {
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
func (d *logDecoder) int() int {
	v := d.uint()
	if v > 1<<62 {
		d.fail("number %d out of range", v)
		return 0
	}
	return int(v)
}

// count reads a list's length, each element at least min bytes: a count the bytes left
// cannot hold is refused before anything is allocated for it.
func (d *logDecoder) count(min int) int {
	v := d.uint()
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.fail("%d elements in %d bytes", v, len(d.b))
	}
	if d.err != nil {
		return 0
	}
	return int(v)
}

func (d *logDecoder) string() string {
	n := d.uint()
	if d.err == nil && (n > uint64(len(d.b)) || n > maxLogField) {
		d.fail("a field of %d bytes in %d", n, len(d.b))
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *logDecoder) bool() bool {
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
