// Package rowlog is the binary form of one record of the orchestrator engine's row log
// (internal/orch, docs/ARCHITECTURE.md "orch.db"): a batch's task row updates, attempt
// inserts and attempt ends, in the order the statements ran. It holds plain values, which the
// engine converts from its row images, so the decoder is fuzzed without the engine's graph.
package rowlog

import "encoding/binary"

// Record is one batch's row changes, in the order the statements ran.
type Record struct {
	Tasks   []Task    // task rows updated: every column an update writes
	Inserts []Attempt // attempts fired: their rows as inserted ('live')
	Ends    []End     // attempts ended
}

// Task is a task row's updatable columns as of the batch.
type Task struct {
	RunID      string
	Idx        int
	State      string
	Attempts   int
	Failures   int
	DispatchID string
	ReadySeq   int64
	RetryAt    string // ts form, "" for none
	Reason     string
	Detail     string
	Question   string
	Answer     string
	Cancel     bool
	Review     string
}

// Attempt is an attempt row as inserted: its state is live, which the record does not repeat.
type Attempt struct {
	DispatchID, RunID string
	TaskIdx, Number   int
	ParentID, Inputs  string
	FiredAt           string
}

// End is an attempt's end: the columns it sets.
type End struct {
	ID, State, Reason, EndedAt, Usage, Verdict string
}

// Version is the first byte of every record; a record of another version is refused.
const Version = 1

// MaxField bounds one string of a record (a task's detail or question, an attempt's
// verdict): the decoder refuses longer ones before allocating.
const MaxField = 16 << 20

// Encode appends r's binary form to dst. Run ids are written once per record and named by
// their position in its run table.
func (r *Record) Encode(dst []byte) []byte {
	dst = append(dst, Version)
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
	for i := range r.Tasks {
		ref(r.Tasks[i].RunID)
	}
	for i := range r.Inserts {
		ref(r.Inserts[i].RunID)
	}
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, id := range order {
		dst = appendString(dst, id)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Tasks)))
	for i := range r.Tasks {
		t := &r.Tasks[i]
		dst = binary.AppendUvarint(dst, runs[t.RunID])
		dst = binary.AppendUvarint(dst, uint64(t.Idx))
		dst = appendString(dst, t.State)
		dst = binary.AppendUvarint(dst, uint64(t.Attempts))
		dst = binary.AppendUvarint(dst, uint64(t.Failures))
		dst = appendString(dst, t.DispatchID)
		dst = binary.AppendUvarint(dst, uint64(t.ReadySeq))
		dst = appendString(dst, t.RetryAt)
		dst = appendString(dst, t.Reason)
		dst = appendString(dst, t.Detail)
		dst = appendString(dst, t.Question)
		dst = appendString(dst, t.Answer)
		dst = appendBool(dst, t.Cancel)
		dst = appendString(dst, t.Review)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Inserts)))
	for i := range r.Inserts {
		a := &r.Inserts[i]
		dst = appendString(dst, a.DispatchID)
		dst = binary.AppendUvarint(dst, runs[a.RunID])
		dst = binary.AppendUvarint(dst, uint64(a.TaskIdx))
		dst = binary.AppendUvarint(dst, uint64(a.Number))
		dst = appendString(dst, a.ParentID)
		dst = appendString(dst, a.Inputs)
		dst = appendString(dst, a.FiredAt)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Ends)))
	for i := range r.Ends {
		x := &r.Ends[i]
		dst = appendString(dst, x.ID)
		dst = appendString(dst, x.State)
		dst = appendString(dst, x.Reason)
		dst = appendString(dst, x.EndedAt)
		dst = appendString(dst, x.Usage)
		dst = appendString(dst, x.Verdict)
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
