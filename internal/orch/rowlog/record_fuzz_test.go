package rowlog

import (
	"errors"
	"reflect"
	"testing"
)

func sample() *Record {
	return &Record{
		Tasks: []Task{
			{RunID: "01RUN", Idx: 3, State: "running", Attempts: 2, Failures: 1, DispatchID: "01D", ReadySeq: 77, RetryAt: "2026-11-25T01:00:00.000000000Z",
				Reason: "r", Detail: "d", Question: "q?", Answer: "a", Cancel: true, Review: `{"x":1}`},
			{RunID: "01RUN2", Idx: 0, State: "pending"},
		},
		Inserts: []Attempt{{DispatchID: "01D", RunID: "01RUN", TaskIdx: 3, Number: 2, ParentID: "01P", Inputs: `[{"a":1}]`,
			FiredAt: "2026-11-25T01:00:00.000000001Z"}},
		Ends: []End{{ID: "01E", State: "succeeded", EndedAt: "2026-11-25T01:00:01.000000000Z", Usage: `{"input_tokens":3}`}},
	}
}

// TestRecordRoundTrip: a record decodes to what was encoded, every field, and no prefix of
// it decodes.
func TestRecordRoundTrip(t *testing.T) {
	want := sample()
	b := want.Encode(nil)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant    %+v", got, want)
	}
	for n := range len(b) {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrDamaged) {
			t.Errorf("a record cut to %d of %d bytes: %v, want ErrDamaged", n, len(b), err)
		}
	}
}

// FuzzLogRecord: the decoder never panics, its errors say the record is damaged, and what it
// accepts encodes back to bytes that decode to the same record.
func FuzzLogRecord(f *testing.F) {
	f.Add(sample().Encode(nil))
	f.Add((&Record{}).Encode(nil))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("error %v does not say the record is damaged", err)
			}
			return
		}
		again, err := Decode(r.Encode(nil))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("round trip changed the record: %+v != %+v", r, again)
		}
	})
}
