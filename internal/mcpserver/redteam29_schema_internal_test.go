package mcpserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agora-dev/agora/internal/orch/api"
)

// fill sets every field v reaches to a value that is not its zero: strings "x", numbers 1,
// one element in each slice and map, every pointer set, time now. What an answer can carry,
// all at once.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.Set(reflect.ValueOf(json.RawMessage(`{"k":"v"}`)))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// checkAnswer validates O's encoding, all zero and all filled, against the outputSchema its
// tool publishes.
func checkAnswer[O any](t *testing.T) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(outputSchema[O](), &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var full, zero O
	fill(reflect.ValueOf(&full).Elem(), 0)
	// A run the service answers always has its counts (orch's reader makes the map; only an
	// error returns a zero run, and an error is not encoded as an answer).
	if c := reflect.ValueOf(&zero).Elem().FieldByName("Run"); c.IsValid() {
		c.FieldByName("Counts").Set(reflect.ValueOf(map[string]int{}))
	}
	for name, v := range map[string]O{"zero": zero, "filled": full} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%T %s: %v", v, name, err)
			continue
		}
		var inst any
		if err := json.Unmarshal(b, &inst); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(inst); err != nil {
			t.Errorf("%T %s does not validate against its outputSchema: %v\n%s", v, name, err, b)
		}
	}
}

// TestRedTeam29_EveryAnswerFitsItsSchema: the end-to-end test
// validates the answers a real run happens to give; this validates every answer type with
// each field it can carry set at once (a fan-out's added task, a review's verdict, a budget,
// awaiting approvals, outputs, events), and with none set, against the outputSchema its tool
// publishes. A field whose encoding the schema does not describe (a type with its own
// MarshalJSON, a RawMessage, a nil list) fails here before a client meets it.
func TestRedTeam29_EveryAnswerFitsItsSchema(t *testing.T) {
	checkAnswer[CapabilitiesAnswer](t)
	checkAnswer[SubagentsAnswer](t)
	checkAnswer[EnvsAnswer](t)
	checkAnswer[DispatchAnswer](t)
	checkAnswer[api.SubmitResponse](t)
	checkAnswer[RunAnswer](t)
	checkAnswer[api.Schedules](t)
	checkAnswer[ScheduleAnswer](t)
}
