package dispatch_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRecordJSON_OneShape: a record is shown with timeout_seconds, done, and what it left
// behind on the record itself (patch, needs_input, ...), never timeout "30m0s" or result;
// and what is shown reads back as the same record (failed before: the CLI
// printed "timeout":"30m0s" and "result":{"patch":...}).
func TestRecordJSON_OneShape(t *testing.T) {
	code := 0
	r := dispatch.Record{ID: "d1", State: "needs_input", Subagent: "asker", SubagentDigest: "sha256:ab",
		Envs: []dispatch.EnvRef{{Name: "demo", Digest: "sha256:cd"}}, Timeout: dispatch.Duration(30 * time.Minute),
		ExitCode: &code, CreatedAt: time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC), Events: []dispatch.Event{},
		Result: &dispatch.Result{Patch: &dispatch.Artifact{Digest: "sha256:ef", Size: 3}, Outputs: []dispatch.Output{},
			NeedsInput: &dispatch.NeedsInput{Question: "Which?", Options: []string{"red", "blue"}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"timeout_seconds": float64(1800), "done": true, "subagent": "asker", "subagent_digest": "sha256:ab"} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v\n%s", k, m[k], want, b)
		}
	}
	for _, k := range []string{"timeout", "result"} {
		if _, ok := m[k]; ok {
			t.Errorf("the shown record has %q:\n%s", k, b)
		}
	}
	if !strings.Contains(string(b), `"patch":{"digest":"sha256:ef","size":3}`) || !strings.Contains(string(b), `"needs_input":{"question":"Which?"`) {
		t.Errorf("patch and question are not on the record:\n%s", b)
	}
	var back dispatch.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back, cmp.AllowUnexported(dispatch.Record{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// A record that left nothing behind reads back without a result.
	r.Result = nil
	b, _ = json.Marshal(&r)
	back = dispatch.Record{}
	if err := json.Unmarshal(b, &back); err != nil || back.Result != nil || back.Timeout != r.Timeout {
		t.Errorf("no result: %v %+v\n%s", err, back.Result, b)
	}
}
