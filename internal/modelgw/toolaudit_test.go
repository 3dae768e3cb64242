package modelgw

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/entry"
)

const testArgsHash = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestGateway_ToolAuditRecorded(t *testing.T) {
	h := start(t, Config{APIKey: []byte(testKey)})
	resp, body := h.do(t, http.MethodPost, "/audit/tool", nil,
		`{"tool":"write_file","decision":"denied","reason":"tool not granted to role `+testKey+`","args_hash":"`+testArgsHash+`","duration_ms":3}`)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("got %d %q, want 204 and no body", resp.StatusCode, body)
	}
	calls := h.audit.ofKind(entry.ToolCall)
	want := []map[string]any{{
		"dispatch":    testDispatchID,
		"role":        testRole,
		"tool":        "write_file",
		"decision":    "denied",
		"reason":      "tool not granted to role [REDACTED]",
		"args_hash":   testArgsHash,
		"duration_ms": int64(3),
	}}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeAuditTool, decisionAllowed, http.StatusNoContent, "")
	wantNoKeyInAudit(t, h.audit)
}

func TestGateway_ToolAuditValidation(t *testing.T) {
	h := start(t, Config{})
	valid := map[string]string{
		"tool": `"read_file"`, "decision": `"allowed"`, "reason": `""`,
		"args_hash": `"` + testArgsHash + `"`, "duration_ms": `12`,
	}
	// with returns the valid body with field k set to the JSON text v ("" drops it).
	with := func(k, v string) string {
		var parts []string
		for _, f := range []string{"tool", "decision", "reason", "args_hash", "duration_ms"} {
			val := valid[f]
			if f == k {
				val = v
			}
			if val != "" {
				parts = append(parts, `"`+f+`":`+val)
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	n := 0
	for _, tc := range []struct {
		name, body, msg string
	}{
		{"DecisionUnknown", with("decision", `"maybe"`), "decision: want allowed, denied, error or ran-outside-grant"},
		{"DecisionMissing", with("decision", ""), "decision"},
		{"HashUppercase", with("args_hash", `"sha256:`+strings.Repeat("A", 64)+`"`), "args_hash"},
		{"HashShort", with("args_hash", `"sha256:abc"`), "args_hash"},
		{"HashOtherAlgorithm", with("args_hash", `"md5:`+strings.Repeat("a", 64)+`"`), "args_hash"},
		{"HashMissing", with("args_hash", ""), "args_hash"},
		{"ToolPath", with("tool", `"../x"`), "tool: must start with a letter"},
		{"ToolSpace", with("tool", `"read file"`), "tool: only letters"},
		{"ToolEmpty", with("tool", `""`), "tool: want 1 to 128 bytes"},
		{"ToolTooLong", with("tool", `"`+strings.Repeat("a", 129)+`"`), "tool: want 1 to 128 bytes"},
		{"ReasonTooLong", with("reason", `"`+strings.Repeat("r", 513)+`"`), "reason: 513 bytes, over the 512 byte limit"},
		{"ReasonNewline", with("reason", `"a\nforged: record"`), "reason: contains a control character"},
		{"DurationNegative", with("duration_ms", `-1`), "duration_ms"},
		{"DurationFraction", with("duration_ms", `1.5`), "duration_ms"},
		{"DurationString", with("duration_ms", `"1"`), "duration_ms"},
		{"DispatchFromBody", strings.TrimSuffix(with("", ""), "}") + `,"dispatch":"other"}`, `unknown field "dispatch"`},
		{"RoleFromBody", strings.TrimSuffix(with("", ""), "}") + `,"role":"admin@sha256:00"}`, `unknown field "role"`},
		{"Nested", with("reason", `{"a":1}`), `field "reason": want a string or a number`},
		{"Array", `[]`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, tc.body)
			if msg := errorOf(t, body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %d %q, want 400 containing %q", resp.StatusCode, msg, tc.msg)
			}
			wantRefused(t, h, routeAuditTool, http.StatusBadRequest, n) // counted, not recorded alone
		})
	}
	if calls := h.audit.ofKind(entry.ToolCall); len(calls) != 0 {
		t.Errorf("got %d tool.call records from invalid reports, want 0: %v", len(calls), calls)
	}
	// The valid body itself is accepted, so each case above fails on its one change.
	if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, with("", "")); resp.StatusCode != http.StatusNoContent {
		t.Errorf("valid report: got %d %q, want 204", resp.StatusCode, body)
	}
}

// TestGateway_ToolAuditNotKept: a decision the audit log did not keep is answered 503, so the
// worker fails the call closed instead of going on unrecorded.
func TestGateway_ToolAuditNotKept(t *testing.T) {
	h := start(t, Config{})
	h.audit.fail.Store(true)
	resp, body := h.do(t, http.MethodPost, "/audit/tool", nil,
		`{"tool":"read_file","decision":"allowed","reason":"granted","args_hash":"`+testArgsHash+`","duration_ms":1}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, body), "not kept") {
		t.Fatalf("got %d %q, want 503 saying the record was not kept", resp.StatusCode, body)
	}
	if got := h.audit.ofKind(entry.ToolCall); len(got) != 0 {
		t.Errorf("got tool.call records %v, want none", got)
	}
}

// TestGateway_ToolAuditPhases: Claude Code's hooks report a call before it runs ("pre",
// decision requested or denied) and with its outcome ("post"), each with its call id; both
// are recorded with the phase and id, and a report without them is recorded as before.
func TestGateway_ToolAuditPhases(t *testing.T) {
	h := start(t, Config{APIKey: []byte(testKey)})
	for _, body := range []string{
		`{"tool":"Bash","decision":"requested","reason":"about to run","args_hash":"` + testArgsHash + `","duration_ms":0,"phase":"pre","call_id":"toolu_01ABC"}`,
		`{"tool":"Bash","decision":"allowed","reason":"ran","args_hash":"` + testArgsHash + `","duration_ms":7,"phase":"post","call_id":"toolu_01ABC"}`,
		`{"tool":"Write","decision":"denied","reason":"not covered","args_hash":"` + testArgsHash + `","duration_ms":0,"phase":"pre","call_id":"toolu_02"}`,
		`{"tool":"Read","decision":"denied","reason":"not loaded","args_hash":"` + testArgsHash + `","duration_ms":0,"call_id":"toolu_03"}`,
		`{"tool":"read_file","decision":"allowed","reason":"","args_hash":"` + testArgsHash + `","duration_ms":1}`,
		`{"tool":"exec_command","decision":"ran-outside-grant","reason":"outside","args_hash":"` + testArgsHash + `","duration_ms":0,"call_id":"item_0"}`,
	} {
		if resp, got := h.do(t, http.MethodPost, "/audit/tool", nil, body); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: got %d %q, want 204", body, resp.StatusCode, got)
		}
	}
	rec := func(tool, decision, reason string, ms int64, extra ...string) map[string]any {
		m := map[string]any{"dispatch": testDispatchID, "role": testRole, "tool": tool, "decision": decision,
			"reason": reason, "args_hash": testArgsHash, "duration_ms": ms}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	want := []map[string]any{
		rec("Bash", "requested", "about to run", 0, "phase", "pre", "call_id", "toolu_01ABC"),
		rec("Bash", "allowed", "ran", 7, "phase", "post", "call_id", "toolu_01ABC"),
		rec("Write", "denied", "not covered", 0, "phase", "pre", "call_id", "toolu_02"),
		rec("Read", "denied", "not loaded", 0, "call_id", "toolu_03"),
		rec("read_file", "allowed", "", 1),
		rec("exec_command", "ran-outside-grant", "outside", 0, "call_id", "item_0"),
	}
	if diff := cmp.Diff(want, h.audit.ofKind(entry.ToolCall)); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
}

// TestGateway_ToolAuditPhaseValidation: "requested" only before a call runs, only with an id;
// a phase the gateway does not know, or an id that is not one, is refused.
func TestGateway_ToolAuditPhaseValidation(t *testing.T) {
	h := start(t, Config{})
	body := func(decision, phase, id string) string {
		s := `{"tool":"Bash","decision":"` + decision + `","reason":"r","args_hash":"` + testArgsHash + `","duration_ms":0`
		if phase != "-" {
			s += `,"phase":"` + phase + `"`
		}
		if id != "-" {
			s += `,"call_id":"` + id + `"`
		}
		return s + "}"
	}
	for _, tc := range []struct {
		name, body, msg string
	}{
		{"RequestedWithoutPhase", body("requested", "-", "toolu_1"), "decision: want allowed, denied, error or ran-outside-grant"},
		{"RequestedAfterTheCall", body("requested", "post", "toolu_1"), "decision: want allowed, denied or error with phase post"},
		// ran-outside-grant is a finding about a call agora could not judge before it ran:
		// never a call's outcome after a pre report, nor a pre report itself.
		{"RanOutsideGrantAsOutcome", body(DecisionRanOutsideGrant, "post", "toolu_1"), "decision: want allowed, denied or error with phase post"},
		{"RanOutsideGrantBeforeTheCall", body(DecisionRanOutsideGrant, "pre", "toolu_1"), "decision: want requested or denied with phase pre"},
		{"AllowedBeforeTheCall", body("allowed", "pre", "toolu_1"), "decision: want requested or denied with phase pre"},
		{"ErrorBeforeTheCall", body("error", "pre", "toolu_1"), "decision: want requested or denied with phase pre"},
		{"PhaseUnknown", body("allowed", "during", "toolu_1"), "phase: want pre, post or none"},
		{"PhaseWithoutID", body("requested", "pre", "-"), "call_id: required with a phase"},
		{"PhaseWithEmptyID", body("allowed", "post", ""), "call_id: required with a phase"},
		{"IDWithSlash", body("allowed", "post", "toolu/../1"), "call_id: only letters"},
		{"IDWithSpace", body("allowed", "-", "toolu 1"), "call_id: only letters"},
		{"IDTooLong", body("allowed", "post", strings.Repeat("a", 129)), "call_id: over 128 bytes"},
		{"PhaseTwice", strings.TrimSuffix(body("allowed", "post", "toolu_1"), "}") + `,"phase":"pre"}`, `field "phase" given twice`},
		{"PhaseNumber", strings.Replace(body("allowed", "-", "toolu_1"), `"call_id"`, `"phase":1,"call_id"`, 1), "phase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got := h.do(t, http.MethodPost, "/audit/tool", nil, tc.body)
			if msg := errorOf(t, got); resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %d %q, want 400 containing %q", resp.StatusCode, msg, tc.msg)
			}
		})
	}
	if calls := h.audit.ofKind(entry.ToolCall); len(calls) != 0 {
		t.Errorf("got %d tool.call records from invalid reports, want 0: %v", len(calls), calls)
	}
}

// FuzzToolAuditRequest: whatever body the sandbox sends, a report the gateway accepts keeps
// the rules the audit log relies on: "requested" only before a call runs, a phase only with
// a call id, and nothing in a field but what its check allows.
func FuzzToolAuditRequest(f *testing.F) {
	for _, s := range []string{
		`{"tool":"Bash","decision":"requested","reason":"r","args_hash":"` + testArgsHash + `","duration_ms":0,"phase":"pre","call_id":"toolu_01"}`,
		`{"tool":"read_file","decision":"allowed","reason":"","args_hash":"` + testArgsHash + `","duration_ms":1}`,
		`{"tool":"Bash","decision":"allowed","phase":"post","call_id":"a/b"}`,
		`{"phase":"pre","phase":"post"}`,
		`[]`, `{`, `{"call_id":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r toolAuditRequest
		if decodeFlat(b, toolAuditFields, &r) != nil || r.validate() != nil {
			return
		}
		if (r.Decision == decisionRequested) != (r.Phase == phasePre && r.Decision != decisionDenied) {
			t.Fatalf("decision %q with phase %q accepted", r.Decision, r.Phase)
		}
		if r.Phase != "" && r.CallID == "" {
			t.Fatalf("phase %q without a call id accepted", r.Phase)
		}
		if r.Decision == DecisionRanOutsideGrant && r.Phase != "" {
			t.Fatalf("%s with phase %q accepted", r.Decision, r.Phase)
		}
		if checkCallID(r.CallID) != nil || checkToolName(r.Tool) != nil || checkReason(r.Reason) != nil || !isDigest(r.ArgsHash) {
			t.Fatalf("invalid field accepted: %+v", r)
		}
	})
}
