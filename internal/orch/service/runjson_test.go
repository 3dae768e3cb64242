package service

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// TestEncodeRun: a run written in parts decodes to the run, with tasks, without tasks and
// with its tasks' strings holding what JSON must escape; a watch line holds it under "run".
func TestEncodeRun(t *testing.T) {
	tasks := make([]api.Task, 3)
	for i := range tasks {
		tasks[i] = api.Task{ID: "t" + string(rune('a'+i)), State: "skipped", Reason: "ancestor-failed",
			Detail: `task "l0-0" failed ` + "\n<&>\u2028", DependsOn: []string{"x", "y"}}
	}
	for _, run := range []api.Run{
		{ID: "r1", Name: "n", State: "failed", Total: 3, Counts: map[string]int{"skipped": 3}, Tasks: tasks},
		{ID: "r2", Name: "n", State: "running"},
		{},
	} {
		var b bytes.Buffer
		if err := encodeRun(newRunEncoder(&b, "", ""), run); err != nil {
			t.Fatal(err)
		}
		var got api.Run
		dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%q does not decode: %v", b.String(), err)
		}
		if dec.More() {
			t.Errorf("%q holds more than one value", b.String())
		}
		if !reflect.DeepEqual(got, run) {
			t.Errorf("decoded %+v, want %+v", got, run)
		}
		want, _ := json.Marshal(run)
		var a, c any
		json.Unmarshal(want, &a)
		json.Unmarshal(b.Bytes(), &c)
		if !reflect.DeepEqual(a, c) {
			t.Errorf("the parts hold %s; in one piece %s", b.String(), want)
		}
		b.Reset()
		if err := encodeRun(newRunEncoder(&b, watchLine(true), "}\n"), run); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(b.String(), "}\n") || strings.Count(b.String(), "\n") != 1 {
			t.Errorf("watch line %q is not one line", b.String())
		}
		var line struct {
			Run    api.Run `json:"run"`
			Lagged bool    `json:"lagged"`
		}
		if err := json.Unmarshal(b.Bytes(), &line); err != nil || !line.Lagged || !reflect.DeepEqual(line.Run, run) {
			t.Errorf("watch line %q: %v, lagged %v, run %+v", b.String(), err, line.Lagged, line.Run)
		}
	}
}

// encodeRun writes run through e, its tasks one at a time.
func encodeRun(e *runEncoder, run api.Run) error {
	for i := range run.Tasks {
		if err := e.task(&run.Tasks[i]); err != nil {
			return err
		}
	}
	return e.end(run)
}
