package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestDispatchInputLimit_RealServer sends agora_dispatch an input one byte over
// wire.MaxInputJSON of canonical JSON through the real binary: it is refused, naming the
// limit, and no dispatch is recorded. An input exactly at the limit is accepted.
func TestDispatchInputLimit_RealServer(t *testing.T) {
	home := newHome(t)
	cs := stdioSession(t, home)
	pad := func(n int) map[string]any { // {"x":"yyy"} of n bytes in canonical JSON
		return map[string]any{"x": strings.Repeat("y", n-len(`{"x":""}`))}
	}
	res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "rogue", "input": pad(wire.MaxInputJSON + 1)})
	if !res.IsError || !strings.Contains(text(res), "over the limit of 122880 bytes of canonical JSON") {
		t.Fatalf("over the limit: got %q (error %v)", text(res), res.IsError)
	}
	var recs []json.RawMessage
	if err := json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("a refused input left %d dispatch records", len(recs))
	}
	// At the limit: accepted and recorded. rogue's command is not granted, so it ends denied
	// at once without starting a worker.
	var out dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "rogue", "input": pad(wire.MaxInputJSON)}), &out)
	if out.Dispatch.State != "failed" || out.Dispatch.Reason != "denied" {
		t.Fatalf("at the limit: %+v", out.Dispatch)
	}
}
