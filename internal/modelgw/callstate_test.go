package modelgw

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// callReport is a /audit/tool body for call id with phase ("" for none) and decision.
func callReport(phase, decision, id string) string {
	b := `{"tool":"Bash","decision":"` + decision + `","reason":"r","args_hash":"` + testArgsHash + `","duration_ms":0`
	if phase != "" {
		b += `,"phase":"` + phase + `"`
	}
	if id != "" {
		b += `,"call_id":"` + id + `"`
	}
	return b + "}"
}

// TestGateway_ToolAuditCallSequence: the sequences claude-code's hook and the worker send are
// recorded, and a report that cannot follow what is on record for its call id is refused
// (400, counted as bad-request) and not recorded.
func TestGateway_ToolAuditCallSequence(t *testing.T) {
	type step struct{ phase, decision string }
	for _, tc := range []struct {
		name  string
		steps []step
		want  []int // the status of each step
	}{
		// What the hook and the worker send.
		{"RanAllowed", []step{{"pre", "requested"}, {"post", "allowed"}}, []int{204, 204}},
		{"RanFailed", []step{{"pre", "requested"}, {"post", "error"}}, []int{204, 204}},
		{"DeniedByClaudesRules", []step{{"pre", "requested"}, {"post", "denied"}}, []int{204, 204}},
		{"CutOffWhileRunning", []step{{"pre", "requested"}}, []int{204}},
		{"DeniedByTheHook", []step{{"pre", "denied"}}, []int{204}},
		{"NotLoaded", []step{{"", "denied"}}, []int{204}},
		{"RanWithoutTheHook", []step{{"", "allowed"}}, []int{204}},
		// What only a forger sends.
		{"PostAfterDenied", []step{{"pre", "denied"}, {"post", "allowed"}}, []int{204, 400}},
		{"DeniedPostAfterDenied", []step{{"pre", "denied"}, {"post", "denied"}}, []int{204, 400}},
		{"SecondPre", []step{{"pre", "requested"}, {"pre", "requested"}}, []int{204, 400}},
		{"PreAfterDenied", []step{{"pre", "denied"}, {"pre", "requested"}}, []int{204, 400}},
		{"SecondPost", []step{{"pre", "requested"}, {"post", "error"}, {"post", "allowed"}}, []int{204, 204, 400}},
		{"PostWithoutPre", []step{{"post", "allowed"}}, []int{400}},
		{"PreAfterPost", []step{{"pre", "requested"}, {"post", "allowed"}, {"pre", "requested"}}, []int{204, 204, 400}},
		{"OneStepAfterPre", []step{{"pre", "denied"}, {"", "allowed"}}, []int{204, 400}},
		{"OneStepAfterRequested", []step{{"pre", "requested"}, {"", "allowed"}}, []int{204, 400}},
		{"OneStepTwice", []step{{"", "denied"}, {"", "allowed"}}, []int{204, 400}},
		{"PreAfterOneStep", []step{{"", "denied"}, {"pre", "requested"}}, []int{204, 400}},
		{"PostAfterOneStep", []step{{"", "denied"}, {"post", "allowed"}}, []int{204, 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Config{RefusalInterval: forever})
			var got []int
			var kept []string
			refused := 0
			for i, s := range tc.steps {
				resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, callReport(s.phase, s.decision, "toolu_01"))
				got = append(got, resp.StatusCode)
				if resp.StatusCode == http.StatusNoContent {
					kept = append(kept, s.phase+"/"+s.decision)
				} else if i < len(tc.want) && tc.want[i] == http.StatusBadRequest {
					refused++
					if msg := errorOf(t, body); !strings.HasPrefix(msg, "tool audit: call_id: ") || strings.Contains(msg, "toolu_01") {
						t.Errorf("step %d: got %q, want a call_id refusal that does not repeat the id", i, msg)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("statuses: got %v, want %v", got, tc.want)
			}
			var recorded []string
			for _, d := range h.audit.ofKind(entry.ToolCall) {
				p, _ := d["phase"].(string)
				recorded = append(recorded, p+"/"+d["decision"].(string))
			}
			if !slices.Equal(recorded, kept) {
				t.Errorf("tool.call records: got %v, want %v", recorded, kept)
			}
			wantRefused(t, h, routeAuditTool, http.StatusBadRequest, refused)
		})
	}
}

// TestGateway_ToolAuditCallIDsApart: each call id has its own state, and reports without a
// call id (the openai runtime's) have none: any number of them is recorded.
func TestGateway_ToolAuditCallIDsApart(t *testing.T) {
	h := start(t, Config{})
	for _, b := range []string{
		callReport("pre", "requested", "toolu_A"),
		callReport("pre", "denied", "toolu_B"),
		callReport("post", "allowed", "toolu_A"),
		callReport("", "denied", "toolu_C"),
		callReport("", "allowed", ""),
		callReport("", "allowed", ""),
		callReport("", "denied", ""),
	} {
		if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, b); resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: got %d %s, want 204", b, resp.StatusCode, body)
		}
	}
	if n := len(h.audit.ofKind(entry.ToolCall)); n != 7 {
		t.Errorf("got %d tool.call records, want 7", n)
	}
}

// TestGateway_ToolAuditCallNotKept: a report whose record the audit log did not keep leaves
// its call as it was, so the runtime's retry is admitted; and the post that follows.
func TestGateway_ToolAuditCallNotKept(t *testing.T) {
	h := start(t, Config{})
	for _, phase := range []string{"pre", "post"} {
		decision := map[string]string{"pre": "requested", "post": "allowed"}[phase]
		h.audit.fail.Store(true)
		if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, callReport(phase, decision, "toolu_01")); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s not kept: got %d %s, want 503", phase, resp.StatusCode, body)
		}
		h.audit.fail.Store(false)
		if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, callReport(phase, decision, "toolu_01")); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s retried: got %d %s, want 204", phase, resp.StatusCode, body)
		}
	}
	if n := len(h.audit.ofKind(entry.ToolCall)); n != 2 {
		t.Errorf("got %d tool.call records, want 2", n)
	}
	if got := len(h.gw.calls.m); got != 1 {
		t.Errorf("the gateway holds the state of %d call ids, want 1", got)
	}
}

// TestGateway_ToolAuditCallRace: of many concurrent outcomes for one call, exactly one is
// recorded.
func TestGateway_ToolAuditCallRace(t *testing.T) {
	const n = 32
	h := start(t, Config{MaxConcurrent: n, RequestsPerSecond: 1e9, RequestBurst: 1e9})
	if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, callReport("pre", "requested", "toolu_01")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("pre: got %d %s", resp.StatusCode, body)
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			decision := []string{"allowed", "error", "denied"}[i%3]
			req, _ := http.NewRequest(http.MethodPost, "http://gateway/audit/tool", strings.NewReader(callReport("post", decision, "toolu_01")))
			resp, err := h.client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[http.StatusNoContent] != 1 || statuses[http.StatusBadRequest] != n-1 {
		t.Errorf("got statuses %v, want one 204 and %d 400", statuses, n-1)
	}
	if got := len(h.audit.ofKind(entry.ToolCall)); got != 2 {
		t.Errorf("got %d tool.call records, want 2 (the pre and one post)", got)
	}
}

// FuzzCallStates drives callStates with arbitrary sequences of reports (4 call ids, every
// phase and decision validate admits, records kept or not) and checks that what is recorded
// for each id is one of the stories a call can tell: a lone pre, a pre "requested" then one
// post, or one report without a phase; and that only ids with a kept record are held.
func FuzzCallStates(f *testing.F) {
	f.Add([]byte{0x00, 0x10, 0x44, 0x84, 0xc4})
	f.Add([]byte{0x01, 0x01, 0x41, 0x81})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var c callStates
		recorded := map[string][]string{}
		for _, op := range ops {
			id := fmt.Sprintf("toolu_%d", op&3)
			phase := []string{"", phasePre, phasePost, phasePost}[op>>2&3]
			decision := []string{decisionRequested, decisionAllowed, decisionDenied, decisionError}[op>>4&3]
			kept := op>>6 != 0 // one report in four is not kept
			r := toolAuditRequest{Tool: "Bash", Decision: decision, ArgsHash: testArgsHash, Phase: phase, CallID: id}
			if r.validate() != nil {
				continue
			}
			tr, err := c.begin(phase, decision, id)
			if err != nil {
				continue
			}
			if kept {
				recorded[id] = append(recorded[id], phase+"/"+decision)
			}
			c.end(id, tr, kept)
		}
		for id, rs := range recorded {
			ok := false
			switch len(rs) {
			case 1:
				ok = true // any report alone
			case 2:
				ok = rs[0] == "pre/requested" && strings.HasPrefix(rs[1], "post/")
			}
			if !ok {
				t.Fatalf("call %s recorded as %v", id, rs)
			}
			if strings.HasPrefix(rs[0], "post/") {
				t.Fatalf("call %s recorded a post first: %v", id, rs)
			}
		}
		if len(c.m) != len(recorded) {
			t.Fatalf("%d call ids held, %d with a kept record", len(c.m), len(recorded))
		}
		for id, s := range c.m {
			if s == callRecording {
				t.Fatalf("call %s left as being recorded", id)
			}
		}
	})
}
