package dispatch_test

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestCallbacks_LearnMarked: every callback event of a learn dispatch, the
// "finished" one a receiver may merge or deploy on among them, carries "learn": true; a plain
// dispatch's events have no learn key at all (their bytes are as before). Failed before: the
// payload did not tell a learn dispatch apart.
func TestCallbacks_LearnMarked(t *testing.T) {
	e := newEnv(t)
	e.subagent("quick", `echo done`)
	bodies := func(id string) []map[string]any {
		rows, err := e.home.DB.SQL().QueryContext(t.Context(), `SELECT body FROM callback_outbox WHERE dispatch_id = ? ORDER BY id`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []map[string]any
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	learn := e.run(dispatch.Request{Subagent: "quick", CallbackURL: "http://127.0.0.1:9/hook", Learn: true})
	plain := e.run(dispatch.Request{Subagent: "quick", CallbackURL: "http://127.0.0.1:9/hook"})
	if learn.State != lifecycle.DispatchFinished || plain.State != lifecycle.DispatchFinished {
		t.Fatalf("states %s %s: %s %s", learn.State, plain.State, learn.Detail, plain.Detail)
	}
	lb, pb := bodies(learn.ID), bodies(plain.ID)
	if len(lb) != 3 || len(pb) != 3 {
		t.Fatalf("%d and %d events, want 3 each (accepted, started, finished)", len(lb), len(pb))
	}
	for _, b := range lb {
		if b["learn"] != true {
			t.Errorf("a learn dispatch's %v event is not marked learn: %v", b["kind"], b)
		}
	}
	if lb[2]["kind"] != "finished" {
		t.Errorf("the last event is %v, want finished", lb[2]["kind"])
	}
	for _, b := range pb {
		if _, ok := b["learn"]; ok {
			t.Errorf("a plain dispatch's %v event has a learn key: %v", b["kind"], b)
		}
	}
}
