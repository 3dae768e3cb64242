package rowlog

import (
	"errors"
	"reflect"
	"testing"
)

// TestReaderReuse: one Reader decodes records one after another, a damaged one among them,
// each to exactly what was encoded: its reused lists and kept values leak nothing from one
// record into the next.
func TestReaderReuse(t *testing.T) {
	other := &Record{
		Tasks:   []Task{{RunID: "01RUN2", Idx: 9, State: "succeeded", DispatchID: "01E"}},
		Inserts: []Attempt{{DispatchID: "01F", RunID: "01RUN2", TaskIdx: 9, Number: 1, Inputs: "[]", FiredAt: "2026-11-25T01:00:02.000000000Z"}},
		Ends:    []End{{ID: "01D", State: "failed", Reason: "exit 1", EndedAt: "2026-11-25T01:00:03.000000000Z"}},
	}
	var r Reader
	for i, want := range []*Record{sample(), other, sample(), other} {
		got, err := r.Decode(want.Encode(nil))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d decoded %+v\nwant    %+v", i, got, want)
		}
		b := want.Encode(nil)
		if _, err := r.Decode(b[:len(b)-1]); !errors.Is(err, ErrDamaged) {
			t.Fatalf("record %d cut short: %v, want ErrDamaged", i, err)
		}
	}
}

// TestReaderStartsOver: past maxSeen kept values the Reader starts over, and decodes on.
func TestReaderStartsOver(t *testing.T) {
	var r Reader
	rec := &Record{Tasks: make([]Task, 1)}
	for i := range maxSeen + 10 {
		rec.Tasks[0] = Task{RunID: "01RUN", State: "running", DispatchID: string(rune('a'+i%26)) + string(rune(i))}
		got, err := r.Decode(rec.Encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got.Tasks[0] != rec.Tasks[0] {
			t.Fatalf("decoded %+v, want %+v", got.Tasks[0], rec.Tasks[0])
		}
		if len(r.seen) > maxSeen+3 {
			t.Fatalf("the Reader keeps %d values, more than %d", len(r.seen), maxSeen)
		}
	}
}
