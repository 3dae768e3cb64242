package dispatch

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// A record's JSON is the one shape of a dispatch: `agora dispatch describe
// -o json` (and list, cancel, resume, run) print it, and the MCP dispatch tools' `dispatch` is
// the same object less what only the host may see (repository path, callback URL, grants,
// binaries, inputs, approvals, trace ids). Against the stored struct it differs in three ways,
// each the form the MCP tools already used:
//
//   - timeout_seconds, an integer, instead of timeout "30m0s": a number a program compares
//     without parsing Go's duration syntax;
//   - what the dispatch left behind (patch, outputs, stdout, stderr, transcript, truncated,
//     needs_input, phases) sits on the record itself, not under result: one place to look
//     for the patch and the question, whether or not the dispatch ended;
//   - done says whether the state is terminal;
//   - outputs is always a list ([] before the dispatch left anything).
//
// The stored columns are not JSON of the record (Result has its own column, Timeout is
// milliseconds), so nothing written before changes.

// recordPlain is Record without its JSON methods.
type recordPlain Record

// recordShown is how a record is shown: the shadow fields at depth 0 hide the stored struct's
// timeout and result (nil, so omitted), and Result's fields are promoted from the embedded
// pointer.
type recordShown struct {
	*recordPlain
	Done           bool            `json:"done"`
	TimeoutSeconds int64           `json:"timeout_seconds"`
	HideTimeout    json.RawMessage `json:"timeout,omitempty"`
	HideResult     json.RawMessage `json:"result,omitempty"`
	*Result
}

// MarshalJSON writes r in its shown shape.
func (r Record) MarshalJSON() ([]byte, error) {
	res := r.Result
	if res == nil {
		res = &Result{}
	}
	if res.Outputs == nil {
		c := *res
		c.Outputs = []Output{}
		res = &c
	}
	return json.Marshal(recordShown{
		recordPlain:    (*recordPlain)(&r),
		Done:           lifecycle.DispatchEnded(r.State),
		TimeoutSeconds: int64(time.Duration(r.Timeout) / time.Second),
		Result:         res,
	})
}

// UnmarshalJSON reads a record in its shown shape (what MarshalJSON wrote).
func (r *Record) UnmarshalJSON(b []byte) error {
	var v recordShown
	v.recordPlain = (*recordPlain)(r)
	v.Result = &Result{}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.Timeout = Duration(time.Duration(v.TimeoutSeconds) * time.Second)
	// A result of nothing but outputs [] is how a record without one is shown.
	probe := *v.Result
	if len(probe.Outputs) == 0 {
		probe.Outputs = nil
	}
	r.Result = nil
	if !reflect.ValueOf(probe).IsZero() {
		r.Result = v.Result
	}
	return nil
}
